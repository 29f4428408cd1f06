#pragma once
// Exercise 4: an optimizer step, stochastic gradient descent with momentum.
//
// MomentumSGD updates its parameters in place from their .grad with the hyper-parameters of
// ember's optim::SGDOptions, and must give the numbers optim::SGD (and torch.optim.SGD) gives.
// For a parameter p with gradient g, one step is:
//   1. maximize: g = -g                 (so weight decay below still pulls p towards 0)
//   2. weight_decay != 0: g = g + weight_decay * p
//   3. momentum != 0: the parameter's buffer b becomes a copy of g on its first step and
//      momentum * b + (1 - dampening) * g on later ones; then g = b, or g + momentum * b with
//      nesterov
//   4. p = p - lr * g
// A parameter whose .grad is undefined is skipped (its buffer does not move). The constructor
// and zero_grad are given; you write MomentumSGD::step in exercises/ex4_sgd_momentum.cpp.
#include <cmath>
#include <utility>
#include <vector>

#include <ember/ember.h>

namespace ember::exercises {

class MomentumSGD {
 public:
  MomentumSGD(std::vector<Tensor> params, const optim::SGDOptions& options)
      : params_(std::move(params)), options_(options), momentum_buffers_(params_.size()) {
    EMBER_CHECK(std::isfinite(options.lr_) && options.lr_ > 0.0, "[MomentumSGD] invalid lr ", options.lr_,
                " (expected a finite lr > 0)");
    options.check("MomentumSGD");
    for (size_t i = 0; i < params_.size(); ++i)
      EMBER_CHECK(params_[i].defined() && is_floating(params_[i].dtype()) && params_[i].requires_grad(),
                  "[MomentumSGD] parameter ", i, " must be a floating point tensor that requires grad");
  }

  void step();  // yours

  void zero_grad() {
    for (const Tensor& p : params_) p.set_grad(Tensor());
  }
  // Parameter i's momentum buffer: undefined until its first step with momentum != 0.
  const Tensor& momentum_buffer(size_t i) const { return momentum_buffers_.at(i); }

 private:
  std::vector<Tensor> params_;
  optim::SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;  // one per parameter
};

}  // namespace ember::exercises
