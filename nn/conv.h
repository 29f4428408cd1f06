#pragma once
#include "nn/module.h"

namespace ember::nn {

// Conv2dOptions(3, 64, 3).stride(1).padding(1).bias(false)
struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, Pair kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  Conv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv2dOptions(in_channels, out_channels, Pair{kernel_size, kernel_size}) {}
  Conv2dOptions& stride(int64_t s) { return stride(Pair{s, s}); }
  Conv2dOptions& stride(Pair s) { stride_ = s; return *this; }
  Conv2dOptions& padding(int64_t p) { return padding(Pair{p, p}); }
  Conv2dOptions& padding(Pair p) { padding_ = p; return *this; }
  Conv2dOptions& dilation(int64_t d) { return dilation(Pair{d, d}); }
  Conv2dOptions& dilation(Pair d) { dilation_ = d; return *this; }
  Conv2dOptions& bias(bool b) { bias_ = b; return *this; }

  int64_t in_channels_, out_channels_;
  Pair kernel_size_, stride_{1, 1}, padding_{0, 0}, dilation_{1, 1};
  bool bias_ = true;
};

// NCHW convolution, weight [out, in, kh, kw]; initialised as PyTorch (uniform, +-1/sqrt(fan_in)).
class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv2d(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  const Conv2dOptions options;
  Tensor weight, bias;

 protected:
  std::string extra_repr() const override;
};

}  // namespace ember::nn
