#include "nn/linear.h"

#include <cmath>

#include "nn/init.h"
#include "nn/repr.h"

namespace ember::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  EMBER_CHECK(in > 0 && out > 0, "[Linear] in_features and out_features must be positive, got ", in, " and ", out);
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features, "[Linear] expected input with last dim ",
              in_features, " (in_features), got shape ", x.defined() ? shape_str(x.shape()) : "undefined");
  EMBER_CHECK(x.device() == weight.device(), "[Linear] input is on ", x.device(), " but the weight is on ",
              weight.device());
  return functional::linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return detail::concat("in_features=", in_features, ", out_features=", out_features, ", bias=",
                        bool_repr(bias.defined()));
}

}  // namespace ember::nn
