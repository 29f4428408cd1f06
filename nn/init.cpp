#include "nn/init.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"

namespace ember::nn::init {

Fans fans_of(const Tensor& t) {
  EMBER_CHECK(t.dim() >= 2, "[init] fan in and fan out need a tensor with at least 2 dims, got shape ",
              shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(const std::string& nonlinearity, double a) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity.rfind("conv", 0) == 0) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + a * a));
  EMBER_FAIL("[init] unknown nonlinearity '", nonlinearity, "'");
}

void uniform_(const Tensor& t, double low, double high) {
  NoGradGuard no_grad;
  t.copy_(rand(t.shape(), TensorOptions(t.dtype()).with_device(t.device())) * (high - low) + low);
}

void normal_(const Tensor& t, double mean, double std) {
  NoGradGuard no_grad;
  t.copy_(randn(t.shape(), TensorOptions(t.dtype()).with_device(t.device())) * std + mean);
}

void constant_(const Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
}
void zeros_(const Tensor& t) { constant_(t, 0.0); }
void ones_(const Tensor& t) { constant_(t, 1.0); }

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  check_enum(mode, FanMode::FanOut, "kaiming", "FanMode");
  Fans f = fans_of(t);
  const double fan = static_cast<double>(mode == FanMode::FanIn ? f.fan_in : f.fan_out);
  return calculate_gain(nonlinearity, a) / std::sqrt(fan);
}
double xavier_std(const Tensor& t, double gain) {
  Fans f = fans_of(t);
  return gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
}
}  // namespace

// A uniform distribution on [-b, b] has standard deviation b / sqrt(3).
void kaiming_uniform_(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  uniform_(t, -bound, bound);
}
void kaiming_normal_(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity));
}
void xavier_uniform_(const Tensor& t, double gain) {
  const double bound = std::sqrt(3.0) * xavier_std(t, gain);
  uniform_(t, -bound, bound);
}
void xavier_normal_(const Tensor& t, double gain) { normal_(t, 0.0, xavier_std(t, gain)); }

}  // namespace ember::nn::init
