#pragma once
#include <optional>

#include "nn/module.h"

namespace ember::nn {

namespace detail {
// Checks a pooling input (4-D NCHW) and names the layer in the error.
void check_pool_input(const Tensor& x, const char* layer);
}

// stride defaults to the kernel size, as PyTorch.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Pair kernel_size, std::optional<Pair> stride = std::nullopt, Pair padding = {0, 0})
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {
    check_window_options(kernel_size, this->stride, padding, {1, 1}, "MaxPool2d");
  }
  explicit MaxPool2d(int64_t k) : MaxPool2d(Pair{k, k}) {}
  Tensor forward(const Tensor& x) override;
  const Pair kernel_size, stride, padding;

 protected:
  std::string extra_repr() const override;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Pair kernel_size, std::optional<Pair> stride = std::nullopt, Pair padding = {0, 0},
                     bool count_include_pad = true)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding),
        count_include_pad(count_include_pad) {
    check_window_options(kernel_size, this->stride, padding, {1, 1}, "AvgPool2d");
  }
  explicit AvgPool2d(int64_t k) : AvgPool2d(Pair{k, k}) {}
  Tensor forward(const Tensor& x) override;
  const Pair kernel_size, stride, padding;
  const bool count_include_pad;

 protected:
  std::string extra_repr() const override;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Pair output_size) : output_size(output_size) {
    EMBER_CHECK(output_size[0] >= 1 && output_size[1] >= 1, "[AdaptiveAvgPool2d] output size must be >= 1, got ",
                shape_str({output_size[0], output_size[1]}));
  }
  explicit AdaptiveAvgPool2d(int64_t s) : AdaptiveAvgPool2d(Pair{s, s}) {}
  Tensor forward(const Tensor& x) override;
  const Pair output_size;

 protected:
  std::string extra_repr() const override;
};

}  // namespace ember::nn
