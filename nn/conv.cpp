#include "nn/conv.h"

#include <cmath>

#include "nn/init.h"
#include "nn/repr.h"

namespace ember::nn {

Conv2d::Conv2d(const Conv2dOptions& o) : options(o) {
  EMBER_CHECK(o.in_channels_ > 0 && o.out_channels_ > 0 && o.kernel_size_[0] > 0 && o.kernel_size_[1] > 0,
              "[Conv2d] channels and kernel size must be positive, got in=", o.in_channels_, " out=", o.out_channels_,
              " kernel=", o.kernel_size_[0], "x", o.kernel_size_[1]);
  check_window_options(o.kernel_size_, o.stride_, o.padding_, o.dilation_, "Conv2d");
  weight = register_parameter("weight", empty({o.out_channels_, o.in_channels_, o.kernel_size_[0], o.kernel_size_[1]}));
  if (o.bias_) bias = register_parameter("bias", empty({o.out_channels_}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::fans_of(weight).fan_in));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() == 4, "[Conv2d] expected 4-D input [N, C, H, W], got shape ",
              x.defined() ? shape_str(x.shape()) : "undefined");
  EMBER_CHECK(x.size(1) == options.in_channels_, "[Conv2d] expected input with ", options.in_channels_,
              " channels, got shape ", shape_str(x.shape()));
  EMBER_CHECK(x.device() == weight.device(), "[Conv2d] input is on ", x.device(), " but the weight is on ",
              weight.device());
  return conv2d(x, weight, bias, options.stride_, options.padding_, options.dilation_);
}

std::string Conv2d::extra_repr() const {
  const auto& o = options;
  // Like PyTorch, padding and dilation appear only when they are not the default.
  std::string out = detail::concat(o.in_channels_, ", ", o.out_channels_, ", kernel_size=",
                                   tuple_repr(o.kernel_size_), ", stride=", tuple_repr(o.stride_));
  if (o.padding_ != Pair{0, 0}) out += ", padding=" + tuple_repr(o.padding_);
  if (o.dilation_ != Pair{1, 1}) out += ", dilation=" + tuple_repr(o.dilation_);
  if (!o.bias_) out += ", bias=False";
  return out;
}

}  // namespace ember::nn
