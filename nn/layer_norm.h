#pragma once
#include "nn/module.h"

namespace ember::nn {

// Normalises over the trailing dims `normalized_shape` of its input, each slice with its own mean
// and biased variance (layer_norm in core/ops.h), then, with elementwise_affine, scales by
// `weight` (ones at first) and shifts by `bias` (zeros), both of normalized_shape.
class LayerNorm : public Module {
 public:
  // bias = false keeps the weight only (PyTorch's LayerNorm(..., bias=False)).
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : LayerNorm(Shape{dim}, eps, elementwise_affine, bias) {}
  Tensor forward(const Tensor& x) override;

  const Shape normalized_shape;
  const double eps;
  const bool elementwise_affine;
  Tensor weight, bias;  // undefined without elementwise_affine (bias: or without bias)

 protected:
  std::string extra_repr() const override;
};

}  // namespace ember::nn
