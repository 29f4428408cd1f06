// CUDA kernels that reduce along one axis: sum/mean/max/min, argmax, softmax and the fused
// softmax-cross-entropy, with the semantics of core/cpu/reduce.cpp. Inputs are contiguous and
// seen as [outer, k, inner] (rows [n, c] for softmax and cross-entropy).
//
// Note [One block per output]
// Each output, one (outer, inner) pair or one row, is reduced by one block: thread t folds
// elements t, t + blockDim, ... into its own accumulator, then the block combines the
// accumulators in shared memory along a fixed tree. The order depends only on the block size, so
// a result is the same on every run. Sums of floats accumulate in double, as on the CPU; the
// order differs from the CPU's, so the two agree to rounding, not bitwise. Blocks stride over the
// outputs, so any count works with one launch. A block per output idles most of its threads when
// k is small (the bias gradient of a Linear sums 128 values per output), which is simple rather
// than fast.
#include <cmath>

#include "core/kernels.h"
#include "cuda/bad_index.cuh"
#include "cuda/block_reduce.cuh"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::ReduceOp;

template <class Op, class T>
__global__ void reduce_kernel(const T* x, int64_t outer, int64_t k, int64_t inner, T* out, bool mean) {
  using Acc = typename Op::Acc;
  for (int64_t o = blockIdx.x; o < outer * inner; o += gridDim.x) {
    const T* base = x + (o / inner) * k * inner + o % inner;
    const Acc total = block_reduce<Op>(k, [&](int64_t j) { return static_cast<Acc>(base[j * inner]); });
    if (threadIdx.x == 0) out[o] = static_cast<T>(mean ? total / static_cast<Acc>(k) : total);
  }
}

void reduce_cuda(ReduceOp op, const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const Device d = out.device();
    const int64_t n = outer * inner;
    switch (op) {
      case ReduceOp::Sum: return launch_per_output(d, n, reduce_kernel<SumOp<T>, T>, px, outer, k, inner, po, false);
      case ReduceOp::Mean: return launch_per_output(d, n, reduce_kernel<SumOp<T>, T>, px, outer, k, inner, po, true);
      case ReduceOp::Max:
        return launch_per_output(d, n, reduce_kernel<ExtremumOp<T, true>, T>, px, outer, k, inner, po, false);
      case ReduceOp::Min:
        return launch_per_output(d, n, reduce_kernel<ExtremumOp<T, false>, T>, px, outer, k, inner, po, false);
    }
  });
}

// One thread per output walking k in order, so ties (and NaNs) pick what the CPU picks: the
// first maximum, and a NaN never beats anything.
template <class T>
struct ArgmaxBody {
  const T* x;
  int64_t k, inner;
  int64_t* out;
  __device__ void operator()(int64_t t) const {
    const T* base = x + (t / inner) * k * inner + t % inner;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (base[j * inner] > base[best * inner]) best = j;
    out[t] = best;
  }
};

void argmax_cuda(const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    for_each(out.device(), outer * inner, ArgmaxBody<T>{x.data<T>(), k, inner, out.data<int64_t>()});
  });
}

// The row's maximum and sum_j exp(x_j - max) (in double for both float types).
template <class T>
struct RowStats {
  T max;
  double sum_exp;
};

template <class T>
__device__ RowStats<T> row_stats(const T* row, int64_t cols) {
  const T m = block_reduce<ExtremumOp<T, true>>(cols, [&](int64_t j) { return row[j]; });
  const double s = block_reduce<SumOp<T>>(cols, [&](int64_t j) { return static_cast<double>(exp(row[j] - m)); });
  return {m, s};
}

template <class T>
__global__ void softmax_kernel(const T* x, int64_t rows, int64_t cols, T* out, bool take_log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * cols;
    T* o = out + r * cols;
    const RowStats<T> s = row_stats(in, cols);
    const T log_sum = static_cast<T>(log(s.sum_exp)), inv = static_cast<T>(1.0 / s.sum_exp);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      o[j] = take_log ? (in[j] - s.max) - log_sum : exp(in[j] - s.max) * inv;
  }
}

void softmax_cuda(const Tensor& x, const Tensor& out, bool log) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    launch_per_output(out.device(), rows, softmax_kernel<T>, x.data<T>(), rows, cols, out.data<T>(), log);
  });
}

// loss_r = lse_r - (1 - s) x_r[t_r] - s / C sum_j x_r[j], with lse_r = max + log(sum exp(x - max)).
// A target outside [0, C) is recorded in `bad` (Note [Index errors found on the device]); its
// loss is 0, and the backward, which only compares columns with it, reads nothing out of range.
template <class T>
__global__ void cross_entropy_forward_kernel(const T* x, const int64_t* target, int64_t n, int64_t c,
                                             int64_t ignore_index, double smoothing, T* loss, T* lse,
                                             BadIndex* bad) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* row = x + r * c;
    const RowStats<T> s = row_stats(row, c);
    const double total =
        smoothing == 0 ? 0.0 : block_reduce<SumOp<T>>(c, [&](int64_t j) { return static_cast<double>(row[j]); });
    if (threadIdx.x != 0) continue;
    const double l = static_cast<double>(s.max) + log(s.sum_exp);
    lse[r] = static_cast<T>(l);
    const int64_t t = target[r];
    loss[r] = t == ignore_index || !index_in_range(bad, IndexCheck::CrossEntropyTarget, t, c)
                  ? T(0)
                  : static_cast<T>(l - (1.0 - smoothing) * static_cast<double>(row[t]) -
                                   smoothing / static_cast<double>(c) * total);
  }
}

void cross_entropy_forward_cuda(const Tensor& logits, const Tensor& target, int64_t ignore_index, double smoothing,
                                const Tensor& loss, const Tensor& lse) {
  const int64_t n = logits.size(0), c = logits.size(1);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    launch_per_output(logits.device(), n, cross_entropy_forward_kernel<T>, logits.data<T>(), target.data<int64_t>(),
                      n, c, ignore_index, smoothing, loss.data<T>(), lse.data<T>(),
                      bad_index_record(logits.device().index));
  });
}

// grad_x[r, j] = g_r (exp(x[r, j] - lse_r) - s / C) - g_r (1 - s) [j == t_r]; 0 for ignored rows.
template <class T>
struct CrossEntropyBackwardBody {
  const T *x, *lse, *grad_loss;
  const int64_t* target;
  int64_t c, ignore_index;
  T uniform, on_target;  // s / C and 1 - s
  T* grad_x;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / c, j = i % c, t = target[r];
    if (t == ignore_index) {
      grad_x[i] = T(0);
      return;
    }
    const T g = grad_loss[r];
    T v = g * (exp(x[i] - lse[r]) - uniform);
    if (j == t) v -= g * on_target;
    grad_x[i] = v;
  }
};

void cross_entropy_backward_cuda(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                 const Tensor& grad_loss, int64_t ignore_index, double smoothing,
                                 const Tensor& grad_logits) {
  const int64_t c = logits.size(1);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    const CrossEntropyBackwardBody<T> body{logits.data<T>(),
                                           lse.data<T>(),
                                           grad_loss.data<T>(),
                                           target.data<int64_t>(),
                                           c,
                                           ignore_index,
                                           static_cast<T>(smoothing / static_cast<double>(c)),
                                           static_cast<T>(1.0 - smoothing),
                                           grad_logits.data<T>()};
    for_each(logits.device(), logits.numel(), body);
  });
}

const bool registered =
    kernels::add_kernel(kernels::reduce, DeviceType::CUDA, &reduce_cuda) &&
    kernels::add_kernel(kernels::argmax, DeviceType::CUDA, &argmax_cuda) &&
    kernels::add_kernel(kernels::softmax, DeviceType::CUDA, &softmax_cuda) &&
    kernels::add_kernel(kernels::cross_entropy_forward, DeviceType::CUDA, &cross_entropy_forward_cuda) &&
    kernels::add_kernel(kernels::cross_entropy_backward, DeviceType::CUDA, &cross_entropy_backward_cuda);

}  // namespace
}  // namespace ember::cuda
