#pragma once
// What Tensor::register_hook returns: a way to remove that hook later (Note [Tensor hooks] in
// core/autograd/hooks.h). It lives apart from hooks.h so that core/tensor.h can return it by
// value without pulling in the hook machinery.
#include <cstdint>
#include <memory>

namespace ember::autograd {

struct TensorHooks;

class HookHandle {
 public:
  HookHandle() = default;  // removes nothing
  HookHandle(std::weak_ptr<TensorHooks> hooks, uint64_t id) : hooks_(std::move(hooks)), id_(id) {}
  // Removes the hook; does nothing when it is already removed or its graph is gone. The handle
  // holds the hooks weakly, so keeping it does not keep a graph alive.
  void remove();

 private:
  std::weak_ptr<TensorHooks> hooks_;
  uint64_t id_ = 0;
};

}  // namespace ember::autograd
