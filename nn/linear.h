#pragma once
#include "nn/module.h"

namespace ember::nn {

// y = x @ weight^T + bias, weight [out_features, in_features].
// Initialised as PyTorch: weight and bias uniform in +-1/sqrt(in_features).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  const int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when constructed without

 protected:
  std::string extra_repr() const override;
};

namespace functional {
using ember::linear;  // core/ops.h: x @ weight.t() + bias
}

}  // namespace ember::nn
