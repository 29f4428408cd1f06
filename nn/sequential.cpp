#include "nn/sequential.h"

namespace ember::nn {

Module& Sequential::append(std::shared_ptr<Module> child) {
  EMBER_CHECK(child, "[Sequential] cannot append an empty module");
  add_child(std::to_string(owned_.size()), child.get());
  owned_.push_back(std::move(child));
  return *owned_.back();
}

Module& Sequential::operator[](size_t i) const {
  EMBER_CHECK(i < owned_.size(), "[Sequential] index ", i, " is out of range for ", owned_.size(), " module(s)");
  return *owned_[i];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (auto& m : owned_) out = (*m)(out);
  return out;
}

}  // namespace ember::nn
