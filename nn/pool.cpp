#include "nn/pool.h"

#include "nn/repr.h"

namespace ember::nn {

namespace detail {
void check_pool_input(const Tensor& x, const char* layer) {
  EMBER_CHECK(x.defined() && x.dim() == 4, "[", layer, "] expected 4-D input [N, C, H, W], got shape ",
              x.defined() ? shape_str(x.shape()) : "undefined");
}
}  // namespace detail

Tensor MaxPool2d::forward(const Tensor& x) {
  detail::check_pool_input(x, "MaxPool2d");
  return max_pool2d(x, kernel_size, stride, padding);
}

Tensor AvgPool2d::forward(const Tensor& x) {
  detail::check_pool_input(x, "AvgPool2d");
  return avg_pool2d(x, kernel_size, stride, padding, count_include_pad);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  detail::check_pool_input(x, "AdaptiveAvgPool2d");
  return adaptive_avg_pool2d(x, output_size);
}

namespace {
// PyTorch's pooling settings; also printed (Note [Printing settings]).
std::string window_settings(Pair kernel_size, Pair stride, Pair padding) {
  return ember::detail::concat("kernel_size=", window_repr(kernel_size), ", stride=", window_repr(stride),
                        ", padding=", window_repr(padding));
}
}  // namespace

std::string MaxPool2d::extra_repr() const { return window_settings(kernel_size, stride, padding); }

// PyTorch does not print count_include_pad; it appears here when it is not the default.
std::string AvgPool2d::extra_repr() const {
  return window_settings(kernel_size, stride, padding) + (count_include_pad ? "" : ", count_include_pad=False");
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + window_repr(output_size); }

}  // namespace ember::nn
