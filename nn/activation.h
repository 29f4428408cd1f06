#pragma once
// Stateless layers: activations and Flatten.
#include <cmath>

#include "nn/module.h"

namespace ember::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {
    EMBER_CHECK(std::isfinite(negative_slope), "[LeakyReLU] negative_slope must be finite, got ", negative_slope);
  }
  Tensor forward(const Tensor& x) override { return leaky_relu(x, negative_slope); }
  const double negative_slope;

 protected:
  std::string extra_repr() const override { return detail::concat("negative_slope=", negative_slope); }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return tanh(x); }
};

// The exact (erf) form by default, or the tanh approximation (nn.GELU(approximate='tanh')).
class GELU : public Module {
 public:
  explicit GELU(GeluApproximate approximate = GeluApproximate::None) : approximate(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  const GeluApproximate approximate;

 protected:
  std::string extra_repr() const override {
    return approximate == GeluApproximate::Tanh ? "approximate='tanh'" : "approximate='none'";
  }
};

// Flattens dims start_dim..end_dim (by default everything but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  const int64_t start_dim, end_dim;

 protected:
  std::string extra_repr() const override { return detail::concat("start_dim=", start_dim, ", end_dim=", end_dim); }
};

}  // namespace ember::nn
