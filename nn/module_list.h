#pragma once
#include <memory>

#include "nn/container.h"

namespace ember::nn {

// An owning list of modules, as torch.nn.ModuleList: it holds and registers them and has no
// forward of its own; the model decides how to call them.
//   nn::ModuleList blocks;
//   for (int i = 0; i < 4; ++i) blocks.add<TransformerBlock>(128, 4);
//   for (nn::Module& block : blocks) h = block(h);
// Children are named "0", "1", ... (state_dict keys "blocks.0.attn.qkv.weight", as PyTorch's);
// they can be indexed, iterated and nested. Note [Owning containers] says who owns what.
class ModuleList : public Container {
 public:
  ModuleList() = default;

  template <class M, class... Args>
  M& add(Args&&... args) {
    return adopt_typed(next_name(), std::make_shared<M>(std::forward<Args>(args)...));
  }
  Module& append(std::shared_ptr<Module> child) { return adopt(next_name(), std::move(child)); }
  // Takes a module a factory made (Note [Modules]).
  template <class M>
  M& push_back(std::unique_ptr<M> child) {
    return adopt_typed(next_name(), std::shared_ptr<M>(std::move(child)));
  }

  Module& operator[](size_t i) const;
  template <class M>
  M& at(size_t i) const {
    return as<M>((*this)[i], "child " + std::to_string(i));
  }

  struct ModuleOf {
    Module& operator()(const Entry& e) const { return *e.module; }
  };
  Iterator<ModuleOf> begin() const { return Iterator<ModuleOf>(owned().begin()); }
  Iterator<ModuleOf> end() const { return Iterator<ModuleOf>(owned().end()); }

 private:
  std::string next_name() const { return std::to_string(size()); }
};

}  // namespace ember::nn
