// CUDA kernels of layer normalisation over x seen as [rows, cols], with the math the CPU's run
// too (core/kernel_bodies/layer_norm.h): the shifted one-pass statistics of Note [Layer-norm
// statistics] and the backward of Note [Layer-norm backward]. The statistics and grad_x give one block to each row
// (Note [One block per output] in cuda/block_reduce.cuh); grad_weight and grad_bias give one thread to
// each column, which walks the rows in order (neighbouring threads read neighbouring columns).
#include "core/kernel_bodies/layer_norm.h"
#include "core/kernels.h"
#include "cuda/block_reduce.cuh"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

namespace body = layer_norm_bodies;

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
      const double d = math::centred(in[j], shift);
      return SumPair{d, d * d};
    });
    const auto st = body::statistics<T>(shift, sums.first, sums.second, cols, eps);
    if (threadIdx.x == 0) {
      mean[r] = st.mean;
      rstd[r] = st.rstd;
    }
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[r * cols + j] = body::normalize(in[j], st, weight, bias, j);
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
    const body::RowStatistics<T> st{mean[r], rstd[r]};
    const SumPair sums = block_reduce<SumPairOp>(cols, [&](int64_t j) {
      const double wg = body::weighted_grad(gr[j], weight, j);
      return SumPair{wg, wg * static_cast<double>(body::xhat(in[j], st))};
    });
    const auto means = body::grad_means<T>(sums.first, sums.second, cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      grad_x[r * cols + j] = body::grad_x(gr[j], in[j], st, weight, j, means);
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
      acc_w += body::weight_grad_term(gv, x[r * cols + j], body::RowStatistics<T>{mean[r], rstd[r]});
      acc_b += body::bias_grad_term(gv);
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
