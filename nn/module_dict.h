#pragma once
#include <memory>
#include <string>
#include <utility>

#include "nn/container.h"

namespace ember::nn {

// An owning map from names to modules, as torch.nn.ModuleDict: keys keep their insertion order,
// each child is registered under its key (state_dict keys "heads.policy.weight"), and there is no
// forward; the model decides which child to call.
//   nn::ModuleDict heads;
//   heads.add<nn::Linear>("policy", 64, 4);
//   heads.insert("value", make_value_head());   // a std::unique_ptr from a factory
//   Tensor logits = heads["policy"](h);
//   for (auto [key, head] : heads) ...
// A key is used once: inserting it again is an error, as registering a name twice is. Note
// [Owning containers] says who owns what.
class ModuleDict : public Container {
 public:
  ModuleDict() = default;

  template <class M, class... Args>
  M& add(const std::string& key, Args&&... args) {
    return adopt_typed(key, std::make_shared<M>(std::forward<Args>(args)...));
  }
  Module& insert(const std::string& key, std::shared_ptr<Module> child) { return adopt(key, std::move(child)); }
  template <class M>
  M& insert(const std::string& key, std::unique_ptr<M> child) {
    return adopt_typed(key, std::shared_ptr<M>(std::move(child)));
  }

  bool contains(const std::string& key) const;
  Module& operator[](const std::string& key) const;
  template <class M>
  M& at(const std::string& key) const {
    return as<M>((*this)[key], "child '" + key + "'");
  }
  std::vector<std::string> keys() const;

  struct KeyAndModule {
    std::pair<const std::string&, Module&> operator()(const Entry& e) const { return {e.name, *e.module}; }
  };
  Iterator<KeyAndModule> begin() const { return Iterator<KeyAndModule>(owned().begin()); }
  Iterator<KeyAndModule> end() const { return Iterator<KeyAndModule>(owned().end()); }
};

}  // namespace ember::nn
