#include "nn/batch_norm.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/recompute.h"
#include "nn/repr.h"

namespace ember::nn {

BatchNorm::BatchNorm(int64_t features, double eps_, double momentum_, bool affine_, bool track)
    : num_features(features), eps(eps_), momentum(momentum_), affine(affine_), track_running_stats(track) {
  EMBER_CHECK(features > 0, "[BatchNorm] num_features must be positive, got ", features);
  check_batch_norm_options(eps_, momentum_, "BatchNorm");
  if (affine) {
    weight = register_parameter("weight", ones({features}));
    bias = register_parameter("bias", zeros({features}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({features}));
    running_var = register_buffer("running_var", ones({features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void BatchNorm::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1.0);
  num_batches_tracked.zero_();
}

Tensor BatchNorm::forward(const Tensor& x) {
  EMBER_CHECK(x.defined(), "[", name(), "] input is undefined");
  check_input(x);
  EMBER_CHECK(x.size(1) == num_features, "[", name(), "] expected input with ", num_features,
              " channels, got shape ", shape_str(x.shape()));
  const bool update = is_training() && track_running_stats && !autograd::is_recomputing();
  Tensor out = batch_norm(x, running_mean, running_var, weight, bias, is_training() || !track_running_stats, momentum,
                          eps, update);
  if (update) {  // counted only once the call has succeeded
    NoGradGuard no_grad;
    num_batches_tracked.add_(ones({}, TensorOptions(kInt64).with_device(num_batches_tracked.device())));
  }
  return out;
}

std::string BatchNorm::extra_repr() const {
  return detail::concat(num_features, ", eps=", eps, ", momentum=", momentum, ", affine=", bool_repr(affine),
                        ", track_running_stats=", bool_repr(track_running_stats));
}

void BatchNorm1d::check_input(const Tensor& x) const {
  EMBER_CHECK(x.dim() == 2 || x.dim() == 3, "[BatchNorm1d] expected 2-D or 3-D input, got shape ",
              shape_str(x.shape()));
}

void BatchNorm2d::check_input(const Tensor& x) const {
  EMBER_CHECK(x.dim() == 4, "[BatchNorm2d] expected 4-D input [N, C, H, W], got shape ", shape_str(x.shape()));
}

}  // namespace ember::nn
