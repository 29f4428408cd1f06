#include "nn/pool.h"

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

}  // namespace ember::nn
