#pragma once
#include "nn/module.h"

namespace ember::nn {

// Zeroes each element with probability p in training and scales the rest by 1 / (1 - p);
// the identity in eval mode. Draws from the default generator of the input's device.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p(p) {
    EMBER_CHECK(p >= 0.0 && p <= 1.0, "[Dropout] probability has to be between 0 and 1, but got ", p);
  }
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training()); }
  const double p;

 protected:
  std::string extra_repr() const override { return detail::concat("p=", p); }
};

}  // namespace ember::nn
