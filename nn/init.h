#pragma once
// Parameter initialisation, in place and without recording autograd (like torch.nn.init).
// Fans follow PyTorch: fan_in = size(1) * receptive field, fan_out = size(0) * receptive field.
#include <string>

#include "core/tensor.h"

namespace ember::nn::init {

enum class FanMode { FanIn, FanOut };

struct Fans {
  int64_t fan_in, fan_out;
};
Fans fans_of(const Tensor& t);

// Gain for a nonlinearity: "linear"/"sigmoid" 1, "tanh" 5/3, "relu" sqrt(2),
// "leaky_relu" sqrt(2 / (1 + a^2)).
double calculate_gain(const std::string& nonlinearity, double a = 0.0);

void uniform_(const Tensor& t, double low = 0.0, double high = 1.0);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
void kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                      const std::string& nonlinearity = "leaky_relu");
void kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                     const std::string& nonlinearity = "leaky_relu");
void xavier_uniform_(const Tensor& t, double gain = 1.0);
void xavier_normal_(const Tensor& t, double gain = 1.0);

}  // namespace ember::nn::init
