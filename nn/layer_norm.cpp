#include "nn/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "nn/repr.h"

namespace ember::nn {

LayerNorm::LayerNorm(Shape shape, double eps, bool affine, bool with_bias)
    : normalized_shape(std::move(shape)), eps(eps), elementwise_affine(affine) {
  EMBER_CHECK(!normalized_shape.empty() &&
                  std::all_of(normalized_shape.begin(), normalized_shape.end(), [](int64_t d) { return d > 0; }),
              "[LayerNorm] normalized_shape must be non-empty with positive dims, got ", shape_str(normalized_shape));
  EMBER_CHECK(std::isfinite(eps) && eps > 0.0, "[LayerNorm] eps must be finite and > 0, got ", eps);
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    if (with_bias) bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
  // PyTorch prints the shape as a Python tuple: (128,) or (4, 8).
  std::string dims;
  for (int64_t d : normalized_shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (normalized_shape.size() == 1) dims += ",";
  return detail::concat("(", dims, "), eps=", eps, ", elementwise_affine=", bool_repr(elementwise_affine));
}

}  // namespace ember::nn
