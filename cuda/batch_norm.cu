// CUDA kernels of batch normalisation over x seen as [n, c, s] (s = spatial size), with the
// math of core/cpu/batch_norm.cpp: the statistics of Note [Shifted moments] (one pass in double),
// and the backward of Note [Batch-norm backward], whose per-element formulas are the CPU's own
// (core/kernel_bodies/batch_norm.h).
//
// Note [Batch-norm sums by channel and split]
// A channel's n * s elements are cut into `splits` contiguous pieces, and block (piece, channel)
// of a 2-D grid sums its piece: the GPU stays busy when there are few channels (a ResNet has 16
// at its widest layers), where one block per channel left most of it idle. Each block writes its
// partial sums (in double) to a scratch buffer, and a second kernel, one thread per channel, adds
// a channel's pieces in piece order and finishes the channel (mean, variance, or the backward's
// coefficients). The pieces depend only on the shape, and both passes add in a fixed order, so
// the result is the same on every run; no atomics. Inside a piece a thread steps through the
// channel with ChannelWalk, and the elementwise kernels find each element's channel with
// ChannelOf: no division per element (Note [Batch-norm indexing]).
#include <algorithm>

#include "core/kernel_bodies/batch_norm.h"
#include "core/kernel_bodies/moments.h"
#include "core/kernels.h"
#include "cuda/block_reduce.cuh"
#include "cuda/cudnn/api.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using batch_norm_bodies::ApplyBody;
using batch_norm_bodies::ChannelOf;
using batch_norm_bodies::ChannelWalk;
using batch_norm_bodies::GradInput;
using batch_norm_bodies::GradInputBody;

// About this many blocks in all, and at least this many elements per piece (16 per thread).
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinPiece = 4096;

int64_t splits_of(int64_t c, int64_t count) {
  const int64_t for_blocks = std::max<int64_t>(1, kTargetBlocks / c);
  const int64_t for_size = std::max<int64_t>(1, (count + kMinPiece - 1) / kMinPiece);
  return std::min(for_blocks, for_size);
}

template <int K>
struct Sums {
  double v[K];
};

// Block (piece blockIdx.x, channel blockIdx.y + k * gridDim.y): partial[(ch * splits + piece) * K
// + k] = the sum over the piece of term(offset, ch).v[k].
template <int K, class Term>
__global__ void channel_partials_kernel(Term term, int64_t n, int64_t c, int64_t s, int64_t splits, double* partial) {
  const int64_t count = n * s, piece = blockIdx.x;
  const int64_t lo = piece * count / splits, hi = (piece + 1) * count / splits;
  for (int64_t ch = blockIdx.y; ch < c; ch += gridDim.y) {
    Sums<K> acc{};
    const int64_t first = lo + threadIdx.x;
    ChannelWalk walk(first, ch, c, s, blockDim.x);
    for (int64_t j = first; j < hi; j += blockDim.x, walk.advance()) {
      const Sums<K> t = term(walk.offset, ch);
      for (int k = 0; k < K; ++k) acc.v[k] += t.v[k];
    }
    for (int k = 0; k < K; ++k) {
      // k = blockDim.x: each thread contributes its own sum once, combined along the block's tree
      const double total = block_reduce<SumOp<double>>(blockDim.x, [&](int64_t) { return acc.v[k]; });
      if (threadIdx.x == 0) partial[(ch * splits + piece) * K + k] = total;
    }
  }
}

// Thread ch: adds the channel's pieces in order and hands the sums to finish(ch, sums).
template <int K, class Finish>
struct CombineBody {
  const double* partial;
  int64_t splits;
  Finish finish;
  __device__ void operator()(int64_t ch) const {
    Sums<K> total{};
    for (int64_t piece = 0; piece < splits; ++piece)
      for (int k = 0; k < K; ++k) total.v[k] += partial[(ch * splits + piece) * K + k];
    finish(ch, total);
  }
};

// The two kernels of the Note for sums of `term` over each channel.
template <int K, class Term, class Finish>
void channel_sums(Device device, int64_t n, int64_t c, int64_t s, const Term& term, const Finish& finish) {
  if (c <= 0) return;
  const int64_t count = n * s;
  if (count == 0) return for_each(device, c, CombineBody<K, Finish>{nullptr, 0, finish});  // empty sums
  const int64_t splits = splits_of(c, count);
  Tensor partial = empty({c * splits * K}, TensorOptions(kFloat64).with_device(device));
  {
    DeviceGuard guard(device.index);
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(std::min(c, kMaxBlocks)));
    channel_partials_kernel<K><<<grid, kBlockSize, 0, stream(device.index)>>>(term, n, c, s, splits,
                                                                              partial.data<double>());
    CUDA_CHECK(cudaGetLastError());
  }
  for_each(device, c, CombineBody<K, Finish>{partial.data<double>(), splits, finish});
}

// Grid-stride loop over the n * c * s elements, body(i, channel of i).
template <class Body>
__global__ void for_each_with_channel_kernel(int64_t numel, int64_t c, int64_t s, Body body) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (ChannelOf at(i, c, s, step); i < numel; i += step, at.advance()) body(i, at.channel);
}

template <class Body>
void for_each_with_channel(Device device, int64_t numel, int64_t c, int64_t s, const Body& body) {
  if (numel <= 0) return;
  DeviceGuard guard(device.index);
  const int64_t blocks = std::min((numel + kBlockSize - 1) / kBlockSize, kMaxBlocks);
  for_each_with_channel_kernel<<<static_cast<unsigned>(blocks), kBlockSize, 0, stream(device.index)>>>(numel, c, s,
                                                                                                       body);
  CUDA_CHECK(cudaGetLastError());
}

// d and d^2 around the channel's first element, Note [Shifted moments] in core/kernel_bodies/moments.h.
template <class T>
struct ShiftedTerm {
  const T* x;
  int64_t s;
  __device__ Sums<2> operator()(int64_t at, int64_t ch) const {
    const double d = math::centred(x[at], static_cast<double>(x[ch * s]));
    return {{d, d * d}};
  }
};

template <class T>
struct MomentsFinish {
  const T* x;
  int64_t s, count;
  T *mean, *var;
  __device__ void operator()(int64_t ch, const Sums<2>& sums) const {
    const double shift = count > 0 ? static_cast<double>(x[ch * s]) : 0.0;
    const math::Moments m = math::shifted_moments(shift, sums.v[0], sums.v[1], count);
    mean[ch] = static_cast<T>(m.mean);
    var[ch] = static_cast<T>(m.var);
  }
};

void batch_norm_stats_cuda(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& var) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    channel_sums<2>(x.device(), n, c, s, ShiftedTerm<T>{x.data<T>(), s},
                    MomentsFinish<T>{x.data<T>(), s, n * s, mean.data<T>(), var.data<T>()});
  });
}

void batch_norm_apply_cuda(const Tensor& x, int64_t, int64_t c, int64_t s, const Tensor& mean, const Tensor& invstd,
                           const Tensor& weight, const Tensor& bias, const Tensor& out) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    const ApplyBody<T> body{x.data<T>(),
                            mean.data<T>(),
                            invstd.data<T>(),
                            weight.defined() ? weight.data<T>() : nullptr,
                            bias.defined() ? bias.data<T>() : nullptr,
                            out.data<T>()};
    for_each_with_channel(x.device(), x.numel(), c, s, body);
  });
}

// sum(g) and sum(g * (x - mean)) over a channel
template <class T>
struct BackwardTerm {
  const T *g, *x, *mean;
  __device__ Sums<2> operator()(int64_t at, int64_t ch) const {
    const double grad = static_cast<double>(g[at]);
    return {{grad, grad * (static_cast<double>(x[at]) - static_cast<double>(mean[ch]))}};
  }
};

// The weight and bias gradients and grad_x's coefficients of a channel (Note [Batch-norm backward])
template <class T>
struct BackwardFinish {
  double count;
  const T *invstd, *weight;  // weight may be null
  T *grad_weight, *grad_bias;  // may be null
  GradInput<T>* coefficients;
  __device__ void operator()(int64_t ch, const Sums<2>& sums) const {
    const double inv = static_cast<double>(invstd[ch]), sum_g = sums.v[0], sum_g_xhat = sums.v[1] * inv;
    if (grad_weight) grad_weight[ch] = static_cast<T>(sum_g_xhat);
    if (grad_bias) grad_bias[ch] = static_cast<T>(sum_g);
    coefficients[ch] = batch_norm_bodies::grad_input_coefficients<T>(
        sum_g, sum_g_xhat, inv, weight ? static_cast<double>(weight[ch]) : 1.0, count);
  }
};

void batch_norm_backward_cuda(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                              const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& grad_x,
                              const Tensor& grad_weight, const Tensor& grad_bias) {
  // Note [cuDNN or ember's kernels]
  if (cudnn::batch_norm_backward(grad_out, x, n, c, s, mean, invstd, weight, grad_x, grad_weight, grad_bias)) return;
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    Tensor scratch = empty({c * static_cast<int64_t>(sizeof(GradInput<T>))}, TensorOptions(kUInt8).with_device(x.device()));
    auto* coefficients = reinterpret_cast<GradInput<T>*>(scratch.raw_data());
    channel_sums<2>(x.device(), n, c, s, BackwardTerm<T>{grad_out.data<T>(), x.data<T>(), mean.data<T>()},
                    BackwardFinish<T>{static_cast<double>(n * s), invstd.data<T>(),
                                      weight.defined() ? weight.data<T>() : nullptr,
                                      grad_weight.defined() ? grad_weight.data<T>() : nullptr,
                                      grad_bias.defined() ? grad_bias.data<T>() : nullptr, coefficients});
    for_each_with_channel(x.device(), x.numel(), c, s,
                          GradInputBody<T>{grad_out.data<T>(), x.data<T>(), mean.data<T>(), coefficients,
                                           grad_x.data<T>()});
  });
}

// The forwards in one call each (Note [Batch-norm forward slots] in core/ops/batch_norm.cpp): cuDNN's
// fused call where it takes it, else the composition of the kernels above.
void batch_norm_train_forward_cuda(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                                   const Tensor& bias, double eps, const kernels::BatchNormRunning& running,
                                   const Tensor& out, const Tensor& mean, const Tensor& invstd) {
  // Note [cuDNN or ember's kernels]
  if (cudnn::batch_norm_train_forward(x, n, c, s, weight, bias, eps, running, out, mean, invstd)) return;
  kernels::batch_norm_train_forward_by_parts(x, n, c, s, weight, bias, eps, running, out, mean, invstd);
}

void batch_norm_eval_forward_cuda(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                                  const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                                  const Tensor& out) {
  if (cudnn::batch_norm_eval_forward(x, n, c, s, running_mean, running_var, weight, bias, eps, out)) return;
  kernels::batch_norm_eval_forward_by_parts(x, n, c, s, running_mean, running_var, weight, bias, eps, out);
}

const bool registered =
    kernels::add_kernel(kernels::batch_norm_stats, DeviceType::CUDA, &batch_norm_stats_cuda) &&
    kernels::add_kernel(kernels::batch_norm_apply, DeviceType::CUDA, &batch_norm_apply_cuda) &&
    kernels::add_kernel(kernels::batch_norm_backward, DeviceType::CUDA, &batch_norm_backward_cuda) &&
    kernels::add_kernel(kernels::batch_norm_train_forward, DeviceType::CUDA, &batch_norm_train_forward_cuda) &&
    kernels::add_kernel(kernels::batch_norm_eval_forward, DeviceType::CUDA, &batch_norm_eval_forward_cuda);

}  // namespace
}  // namespace ember::cuda
