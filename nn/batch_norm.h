#pragma once
#include "nn/module.h"

namespace ember::nn {

// Note [BatchNorm running statistics]
// In training mode the batch's mean and (biased) variance normalise the input, and the running
// estimates move towards them: running = (1 - momentum) * running + momentum * batch, with the
// unbiased variance, exactly as PyTorch; num_batches_tracked counts the updates. In eval mode
// the running estimates normalise. While activation checkpointing recomputes a forward
// (autograd::is_recomputing()), the statistics are left alone so a step updates them once.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  void reset_running_stats();

  const int64_t num_features;
  const double eps, momentum;
  const bool affine, track_running_stats;
  Tensor weight, bias;                                     // affine only
  Tensor running_mean, running_var, num_batches_tracked;  // track_running_stats only

 protected:
  BatchNorm(int64_t num_features, double eps, double momentum, bool affine, bool track_running_stats);
  virtual void check_input(const Tensor& x) const = 0;
  std::string extra_repr() const override;
};

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input(const Tensor& x) const override;
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input(const Tensor& x) const override;
};

}  // namespace ember::nn
