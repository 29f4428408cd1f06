// The batch_norm_backward slot through cuDNN (Note [cuDNN or ember's kernels] in cuda/cudnn.h).
//
// Note [cuDNN's batch-norm backward]
// The slot receives the batch statistics the forward saved: mean and invstd = 1 / sqrt(biased
// variance + eps). cuDNN's cudnnBatchNormalizationBackward takes exactly these as savedMean and
// savedInvVariance and then recomputes neither; the epsilon argument only matters without them,
// so CUDNN_BN_MIN_EPSILON is passed (the slot does not know the forward's eps, and needs not).
// Its spatial mode reduces over n, h and w of an NCHW tensor: x [n, c, s] is given as
// [n, c, s, 1] (cuda/cudnn_shapes.h). A batch norm without affine weight is the one with weight 1,
// so a ones vector stands in for it; gradients the caller did not ask for go to scratch vectors.
// float32 only: float64 runs ember's kernel.
#include "cuda/context.h"
#include "cuda/cudnn.h"
#include "cuda/cudnn_handle.h"
#include "cuda/cudnn_shapes.h"

namespace ember::cuda::cudnn {

bool batch_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                         const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias) {
  if (!cudnn_active() || x.dtype() != kFloat32) return false;
  const auto shape = cudnn_batch_norm_shape(n, c, s);
  if (!shape) return false;
  const int device = x.device().index;
  const DeviceGuard guard(device);  // cuDNN launches on the current device
  const cudnnDataType_t type = cudnn_data_type(x.dtype());
  TensorDescriptor data, channels;
  data.set(type, *shape);
  CUDNN_CHECK(cudnn_api().cudnnDeriveBNTensorDescriptor(channels.get(), data.get(), CUDNN_BATCHNORM_SPATIAL));
  const TensorOptions per_channel = TensorOptions(x.dtype()).with_device(x.device());
  const Tensor scale = weight.defined() ? weight : ones({c}, per_channel);
  const Tensor gw = grad_weight.defined() ? grad_weight : empty({c}, per_channel);
  const Tensor gb = grad_bias.defined() ? grad_bias : empty({c}, per_channel);
  const Blend blend(type);
  CUDNN_CHECK(cudnn_api().cudnnBatchNormalizationBackward(
      cudnn_handle(device), CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), blend.one(), blend.zero(), data.get(),
      x.raw_data(), data.get(), grad_out.raw_data(), data.get(), grad_x.raw_data(), channels.get(), scale.raw_data(),
      gw.raw_data(), gb.raw_data(), CUDNN_BN_MIN_EPSILON, mean.raw_data(), invstd.raw_data()));
  note_call();
  return true;
}

}  // namespace ember::cuda::cudnn
