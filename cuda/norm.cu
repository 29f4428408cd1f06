// CUDA kernels of batch normalisation over x seen as [n, c, s] (s = spatial size), with the
// math of core/cpu/norm.cpp: statistics in double, two passes (no E[x^2] - E[x]^2 cancellation),
// and the backward of Note [Batch-norm backward]. The statistics and the backward give one block
// to each channel (Note [One block per output] in cuda/reduce.cu); applying is elementwise.
#include "core/kernels.h"
#include "cuda/block_reduce.cuh"
#include "cuda/cudnn.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

// Element j of channel ch, for j in [0, n * s): sample j / s, position j % s.
__device__ inline int64_t channel_offset(int64_t j, int64_t ch, int64_t c, int64_t s) {
  return ((j / s) * c + ch) * s + j % s;
}

template <class T>
__global__ void batch_norm_stats_kernel(const T* x, int64_t n, int64_t c, int64_t s, T* mean, T* var) {
  const int64_t count = n * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    auto at = [&](int64_t j) { return static_cast<double>(x[channel_offset(j, ch, c, s)]); };
    const double mu = block_reduce<SumOp<double>>(count, at) / static_cast<double>(count);
    const double sq = block_reduce<SumOp<double>>(count, [&](int64_t j) {
      const double d = at(j) - mu;
      return d * d;
    });
    if (threadIdx.x == 0) {
      mean[ch] = static_cast<T>(mu);
      var[ch] = static_cast<T>(sq / static_cast<double>(count));
    }
  }
}

void batch_norm_stats_cuda(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& var) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    launch_per_output(x.device(), c, batch_norm_stats_kernel<T>, x.data<T>(), n, c, s, mean.data<T>(), var.data<T>());
  });
}

template <class T>
struct BatchNormApplyBody {
  const T *x, *mean, *invstd, *weight, *bias;  // weight and bias may be null
  int64_t c, s;
  T* out;
  __device__ void operator()(int64_t i) const {
    const int64_t ch = (i / s) % c;
    const T scale = invstd[ch] * (weight ? weight[ch] : T(1));
    const T shift = (bias ? bias[ch] : T(0)) - mean[ch] * scale;
    out[i] = x[i] * scale + shift;
  }
};

void batch_norm_apply_cuda(const Tensor& x, int64_t, int64_t c, int64_t s, const Tensor& mean, const Tensor& invstd,
                           const Tensor& weight, const Tensor& bias, const Tensor& out) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    const BatchNormApplyBody<T> body{x.data<T>(),
                                     mean.data<T>(),
                                     invstd.data<T>(),
                                     weight.defined() ? weight.data<T>() : nullptr,
                                     bias.defined() ? bias.data<T>() : nullptr,
                                     c,
                                     s,
                                     out.data<T>()};
    for_each(x.device(), x.numel(), body);
  });
}

template <class T>
__global__ void batch_norm_backward_kernel(const T* g, const T* x, int64_t n, int64_t c, int64_t s, const T* mean,
                                           const T* invstd, const T* weight, T* grad_x, T* grad_weight,
                                           T* grad_bias) {
  const int64_t count = n * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const double mu = static_cast<double>(mean[ch]), inv = static_cast<double>(invstd[ch]);
    auto grad_at = [&](int64_t j) { return static_cast<double>(g[channel_offset(j, ch, c, s)]); };
    auto centred_at = [&](int64_t j) { return static_cast<double>(x[channel_offset(j, ch, c, s)]) - mu; };
    const double sum_g = block_reduce<SumOp<double>>(count, grad_at);
    const double sum_g_xhat =
        block_reduce<SumOp<double>>(count, [&](int64_t j) { return grad_at(j) * centred_at(j); }) * inv;
    if (threadIdx.x == 0) {
      if (grad_weight) grad_weight[ch] = static_cast<T>(sum_g_xhat);
      if (grad_bias) grad_bias[ch] = static_cast<T>(sum_g);
    }
    const double k = (weight ? static_cast<double>(weight[ch]) : 1.0) * inv / static_cast<double>(count);
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
      const double xhat = centred_at(j) * inv;
      grad_x[channel_offset(j, ch, c, s)] =
          static_cast<T>(k * (static_cast<double>(count) * grad_at(j) - sum_g - xhat * sum_g_xhat));
    }
  }
}

void batch_norm_backward_cuda(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                              const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& grad_x,
                              const Tensor& grad_weight, const Tensor& grad_bias) {
  // Note [cuDNN or ember's kernels]
  if (cudnn::batch_norm_backward(grad_out, x, n, c, s, mean, invstd, weight, grad_x, grad_weight, grad_bias)) return;
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    launch_per_output(x.device(), c, batch_norm_backward_kernel<T>, grad_out.data<T>(), x.data<T>(), n, c, s,
                      mean.data<T>(), invstd.data<T>(), weight.defined() ? weight.data<T>() : nullptr,
                      grad_x.data<T>(), grad_weight.defined() ? grad_weight.data<T>() : nullptr,
                      grad_bias.defined() ? grad_bias.data<T>() : nullptr);
  });
}

const bool registered =
    kernels::add_kernel(kernels::batch_norm_stats, DeviceType::CUDA, &batch_norm_stats_cuda) &&
    kernels::add_kernel(kernels::batch_norm_apply, DeviceType::CUDA, &batch_norm_apply_cuda) &&
    kernels::add_kernel(kernels::batch_norm_backward, DeviceType::CUDA, &batch_norm_backward_cuda);

}  // namespace
}  // namespace ember::cuda
