#pragma once
// What Tensor::register_hook and Module::register_forward_hook return: a way to remove that hook
// later (Note [Tensor hooks] in core/autograd/hooks.h, Note [Forward hooks] in nn/module.h). It
// lives apart from hooks.h so that core/tensor.h can return it by value without pulling in the
// hook machinery.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ember::autograd {

// Where hooks are kept, as far as a handle needs to know: something it can remove one from.
struct HookRegistry {
  virtual ~HookRegistry() = default;
  virtual void remove_hook(uint64_t id) = 0;
};

// Hooks of one kind in registration order, each with the id its handle removes it by.
template <class Hook>
struct HookList : HookRegistry {
  std::vector<std::pair<uint64_t, Hook>> hooks;
  uint64_t next_id = 0;

  uint64_t add(Hook hook) {
    hooks.emplace_back(next_id, std::move(hook));
    return next_id++;
  }
  void remove_hook(uint64_t id) override {
    std::erase_if(hooks, [id](const auto& entry) { return entry.first == id; });
  }
};

class HookHandle {
 public:
  HookHandle() = default;  // removes nothing
  HookHandle(std::weak_ptr<HookRegistry> registry, uint64_t id) : registry_(std::move(registry)), id_(id) {}
  // Removes the hook; does nothing when it is already removed or its owner (a graph, a module)
  // is gone. The handle holds the hooks weakly, so keeping it keeps nothing alive.
  void remove() {
    if (std::shared_ptr<HookRegistry> registry = registry_.lock()) registry->remove_hook(id_);
  }

 private:
  std::weak_ptr<HookRegistry> registry_;
  uint64_t id_ = 0;
};

}  // namespace ember::autograd
