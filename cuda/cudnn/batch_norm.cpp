// The batch-norm slots through cuDNN (Note [cuDNN or ember's kernels] in cuda/cudnn/api.h).
//
// Note [cuDNN's batch-norm forward]
// batch_norm_train_forward is cudnnBatchNormalizationForwardTraining, which fuses what ember's
// kernels do in steps (Note [Batch-norm forward slots] in core/ops/batch_norm.cpp): the batch mean and
// biased variance, y = (x - mean) / sqrt(var + eps) * scale + bias, and, given running tensors,
// running = (1 - factor) * running + factor * batch statistic, with factor = exponentialAverageFactor.
// That is PyTorch's update with factor = momentum (PyTorch passes its momentum there), and cuDNN's
// running variance takes the unbiased batch variance, count / (count - 1) times the biased one,
// which is PyTorch's too (pytorch/pytorch#106366, apache/mxnet#21111 measured it). Null running
// tensors skip the update. resultSaveMean and resultSaveInvVariance are the batch mean and
// 1 / sqrt(biased var + eps) despite the latter's name: exactly the mean and invstd that ember's
// forward saves and every backward slot takes (Note [cuDNN's batch-norm backward]).
// batch_norm_eval_forward is cudnnBatchNormalizationForwardInference with the running statistics.
// eps must be at least CUDNN_BN_MIN_EPSILON, 0 in cuDNN 9, so every eps ember accepts (> 0) goes
// to cuDNN; a smaller one would stay on ember's kernels. Running tensors that are views with gaps
// stay there too: cuDNN writes [c] contiguous values.
//
// Note [cuDNN's batch-norm backward]
// The slot receives the batch statistics the forward saved: mean and invstd = 1 / sqrt(biased
// variance + eps). cuDNN's cudnnBatchNormalizationBackward takes exactly these as savedMean and
// savedInvVariance and then recomputes neither; the epsilon argument only matters without them,
// so CUDNN_BN_MIN_EPSILON is passed (the slot does not know the forward's eps, and needs not).
//
// All three use the spatial mode, which reduces over n, h and w of an NCHW tensor: x [n, c, s] is
// given as [n, c, s, 1] (cuda/cudnn/shapes.h). A batch norm without affine weight is the one with
// weight 1 (and bias 0), so a ones (zeros) vector stands in; gradients the caller did not ask for
// go to scratch vectors. float32 only: float64 runs ember's kernels.
#include "cuda/context.h"
#include "cuda/cudnn/api.h"
#include "cuda/cudnn/handle.h"
#include "cuda/cudnn/shapes.h"

namespace ember::cuda::cudnn {
namespace {

// x's descriptor, or nullopt when cuDNN does not take the call.
std::optional<std::array<int, 4>> served_shape(const Tensor& x, int64_t n, int64_t c, int64_t s, BatchNormPass pass) {
  if (!cudnn_active() || x.dtype() != kFloat32) return std::nullopt;
  return cudnn_batch_norm_shape(n, c, s, pass);
}

// x's descriptor and the per-channel one (1 x c x 1 x 1) that cuDNN derives from it.
struct Descriptors {
  TensorDescriptor data, channels;
  explicit Descriptors(const std::array<int, 4>& shape) {
    data.set(CUDNN_DATA_FLOAT, shape);
    CUDNN_CHECK(cudnn_api().cudnnDeriveBNTensorDescriptor(channels.get(), data.get(), CUDNN_BATCHNORM_SPATIAL));
  }
};

// t, or a [c] vector of `value` where it is undefined (no weight is weight 1, no bias is bias 0).
Tensor or_filled(const Tensor& t, int64_t c, const Tensor& like, double value) {
  return t.defined() ? t : full({c}, value, TensorOptions(like.dtype()).with_device(like.device()));
}

}  // namespace

bool batch_norm_train_forward(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                              const Tensor& bias, double eps, const kernels::BatchNormRunning& running,
                              const Tensor& out, const Tensor& mean, const Tensor& invstd) {
  const auto shape = served_shape(x, n, c, s, BatchNormPass::Training);
  if (!shape || eps < CUDNN_BN_MIN_EPSILON) return false;
  const bool update = running.mean.defined();
  if (update && !(running.mean.is_contiguous() && running.var.is_contiguous())) return false;
  const int device = x.device().index;
  const DeviceGuard guard(device);  // cuDNN launches on the current device
  const Descriptors d(*shape);
  const Tensor scale = or_filled(weight, c, x, 1.0), shift = or_filled(bias, c, x, 0.0);
  const Blend blend(CUDNN_DATA_FLOAT);
  CUDNN_CHECK(cudnn_api().cudnnBatchNormalizationForwardTraining(
      cudnn_handle(device), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), d.data.get(), x.raw_data(),
      d.data.get(), out.raw_data(), d.channels.get(), scale.raw_data(), shift.raw_data(), running.momentum,
      update ? running.mean.raw_data() : nullptr, update ? running.var.raw_data() : nullptr, eps, mean.raw_data(),
      invstd.raw_data()));
  note_call();
  return true;
}

bool batch_norm_eval_forward(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                             const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                             const Tensor& out) {
  const auto shape = served_shape(x, n, c, s, BatchNormPass::Inference);
  if (!shape || eps < CUDNN_BN_MIN_EPSILON) return false;
  const int device = x.device().index;
  const DeviceGuard guard(device);
  const Descriptors d(*shape);
  const Tensor scale = or_filled(weight, c, x, 1.0), shift = or_filled(bias, c, x, 0.0);
  const Blend blend(CUDNN_DATA_FLOAT);
  CUDNN_CHECK(cudnn_api().cudnnBatchNormalizationForwardInference(
      cudnn_handle(device), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), d.data.get(), x.raw_data(),
      d.data.get(), out.raw_data(), d.channels.get(), scale.raw_data(), shift.raw_data(), running_mean.raw_data(),
      running_var.raw_data(), eps));
  note_call();
  return true;
}

bool batch_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                         const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias) {
  const auto shape = served_shape(x, n, c, s, BatchNormPass::Training);
  if (!shape) return false;
  const int device = x.device().index;
  const DeviceGuard guard(device);
  const Descriptors d(*shape);
  const TensorOptions per_channel = TensorOptions(x.dtype()).with_device(x.device());
  const Tensor scale = or_filled(weight, c, x, 1.0);
  const Tensor gw = grad_weight.defined() ? grad_weight : empty({c}, per_channel);
  const Tensor gb = grad_bias.defined() ? grad_bias : empty({c}, per_channel);
  const Blend blend(CUDNN_DATA_FLOAT);
  CUDNN_CHECK(cudnn_api().cudnnBatchNormalizationBackward(
      cudnn_handle(device), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), blend.one(), blend.zero(),
      d.data.get(), x.raw_data(), d.data.get(), grad_out.raw_data(), d.data.get(), grad_x.raw_data(),
      d.channels.get(), scale.raw_data(), gw.raw_data(), gb.raw_data(), CUDNN_BN_MIN_EPSILON, mean.raw_data(),
      invstd.raw_data()));
  note_call();
  return true;
}

}  // namespace ember::cuda::cudnn
