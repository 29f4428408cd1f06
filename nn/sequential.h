#pragma once
#include <memory>

#include "nn/module.h"

namespace ember::nn {

// Runs its children in order. Unlike other modules it owns them:
//   nn::Sequential seq;
//   seq.add<nn::Linear>(784, 512);
//   seq.add<nn::ReLU>();
// Children are named "0", "1", ... and can be indexed, iterated and nested.
class Sequential : public Module {
 public:
  Sequential() = default;

  template <class M, class... Args>
  M& add(Args&&... args) {
    auto child = std::make_shared<M>(std::forward<Args>(args)...);
    M& ref = *child;
    append(std::move(child));
    return ref;
  }
  Module& append(std::shared_ptr<Module> child);

  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "Sequential"; }

  size_t size() const { return owned_.size(); }
  Module& operator[](size_t i) const;
  template <class M>
  M& at(size_t i) const {
    auto* m = dynamic_cast<M*>(&(*this)[i]);
    EMBER_CHECK(m, "[Sequential] child ", i, " is a ", (*this)[i].name(), ", not the requested type");
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
  Iterator begin() const { return Iterator(owned_.begin()); }
  Iterator end() const { return Iterator(owned_.end()); }

 private:
  std::vector<std::shared_ptr<Module>> owned_;
};

}  // namespace ember::nn
