// CUDA kernels of layer normalisation over x seen as [rows, cols], with the math of
// core/cpu/layer_norm.cpp: the shifted one-pass statistics of Note [Layer-norm statistics] and the
// backward of Note [Layer-norm backward]. The statistics and grad_x give one block to each row
// (Note [One block per output] in cuda/reduce.cu); grad_weight and grad_bias give one thread to
// each column, which walks the rows in order (neighbouring threads read neighbouring columns).
#include "core/kernels.h"
#include "cuda/block_reduce.cuh"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

// Two sums reduced together by one block_reduce.
struct SumPair {
  double first, second;
};
struct SumPairOp {
  using Acc = SumPair;
  __device__ static Acc identity() { return {0.0, 0.0}; }
  __device__ static Acc step(Acc acc, Acc v) { return {acc.first + v.first, acc.second + v.second}; }
};

template <class T>
__global__ void layer_norm_forward_kernel(const T* x, const T* weight, const T* bias, int64_t rows, int64_t cols,
                                          double eps, T* out, T* mean, T* rstd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * cols;
    const double shift = static_cast<double>(in[0]);
    const SumPair sums = block_reduce<SumPairOp>(cols, [&](int64_t j) {
      const double d = static_cast<double>(in[j]) - shift;
      return SumPair{d, d * d};
    });
    const double offset = sums.first / static_cast<double>(cols);
    const double var = fmax(sums.second / static_cast<double>(cols) - offset * offset, 0.0);
    const T m = static_cast<T>(shift + offset), inv = static_cast<T>(1.0 / sqrt(var + eps));
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = inv;
    }
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      out[r * cols + j] = (in[j] - m) * inv * (weight ? weight[j] : T(1)) + (bias ? bias[j] : T(0));
  }
}

void layer_norm_forward_cuda(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                             const Tensor& mean, const Tensor& rstd) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    launch_per_output(x.device(), x.size(0), layer_norm_forward_kernel<T>, x.data<T>(),
                      weight.defined() ? weight.data<T>() : nullptr, bias.defined() ? bias.data<T>() : nullptr,
                      x.size(0), x.size(1), eps, out.data<T>(), mean.data<T>(), rstd.data<T>());
  });
}

template <class T>
__global__ void layer_norm_grad_x_kernel(const T* g, const T* x, const T* mean, const T* rstd, const T* weight,
                                         int64_t rows, int64_t cols, T* grad_x) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *gr = g + r * cols, *in = x + r * cols;
    const T m = mean[r], inv = rstd[r];
    const SumPair sums = block_reduce<SumPairOp>(cols, [&](int64_t j) {
      const double wg = static_cast<double>(gr[j]) * (weight ? static_cast<double>(weight[j]) : 1.0);
      return SumPair{wg, wg * static_cast<double>((in[j] - m) * inv)};
    });
    const T a = static_cast<T>(sums.first / static_cast<double>(cols));
    const T b = static_cast<T>(sums.second / static_cast<double>(cols));
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const T xhat = (in[j] - m) * inv;
      grad_x[r * cols + j] = inv * ((weight ? weight[j] : T(1)) * gr[j] - a - xhat * b);
    }
  }
}

// grad_weight[j] = sum over rows of g * xhat, grad_bias[j] = sum over rows of g (either may be null).
template <class T>
struct AffineGradBody {
  const T *g, *x, *mean, *rstd;
  int64_t rows, cols;
  T *grad_weight, *grad_bias;
  __device__ void operator()(int64_t j) const {
    double acc_w = 0.0, acc_b = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const T gv = g[r * cols + j];
      acc_w += static_cast<double>(gv * ((x[r * cols + j] - mean[r]) * rstd[r]));
      acc_b += static_cast<double>(gv);
    }
    if (grad_weight) grad_weight[j] = static_cast<T>(acc_w);
    if (grad_bias) grad_bias[j] = static_cast<T>(acc_b);
  }
};

void layer_norm_backward_cuda(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                              const Tensor& grad_bias) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    const int64_t rows = x.size(0), cols = x.size(1);
    launch_per_output(x.device(), rows, layer_norm_grad_x_kernel<T>, grad_out.data<T>(), x.data<T>(), mean.data<T>(),
                      rstd.data<T>(), weight.defined() ? weight.data<T>() : nullptr, rows, cols, grad_x.data<T>());
    if (!grad_weight.defined() && !grad_bias.defined()) return;
    for_each(x.device(), cols,
             AffineGradBody<T>{grad_out.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(), rows, cols,
                               grad_weight.defined() ? grad_weight.data<T>() : nullptr,
                               grad_bias.defined() ? grad_bias.data<T>() : nullptr});
  });
}

const bool registered =
    kernels::add_kernel(kernels::layer_norm_forward, DeviceType::CUDA, &layer_norm_forward_cuda) &&
    kernels::add_kernel(kernels::layer_norm_backward, DeviceType::CUDA, &layer_norm_backward_cuda);

}  // namespace
}  // namespace ember::cuda
