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
    auto child = std::make_shared<M>(std::forward<Args>(args)...);
    M& ref = *child;
    append(std::move(child));
    return ref;
  }
  Module& append(std::shared_ptr<Module> child);
  template <class M>
  M& push_back(std::unique_ptr<M> child) {
    M& ref = *child;
    append(std::shared_ptr<Module>(std::move(child)));
    return ref;
  }

  std::string name() const override { return "ModuleList"; }

  size_t size() const { return owned().size(); }
  Module& operator[](size_t i) const;
  template <class M>
  M& at(size_t i) const {
    auto* m = dynamic_cast<M*>(&(*this)[i]);
    EMBER_CHECK(m, "[", name(), "] child ", i, " is a ", (*this)[i].name(), ", not the requested type");
    return *m;
  }

  class Iterator {
   public:
    explicit Iterator(std::vector<std::shared_ptr<Module>>::const_iterator it) : it_(it) {}
    Module& operator*() const { return **it_; }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return it_ != o.it_; }

   private:
    std::vector<std::shared_ptr<Module>>::const_iterator it_;
  };
  Iterator begin() const { return Iterator(owned().begin()); }
  Iterator end() const { return Iterator(owned().end()); }
};

}  // namespace ember::nn
