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
//
// Note [Split reductions]
// A block per output leaves the GPU nearly idle when there are few outputs and long rows: a full
// sum(x) is one output, so one block of 256 threads would read the whole tensor. Then sum, mean,
// max, min and argmax split each row into `splits` chunks of `chunk` elements (split_rows): pass
// 1 gives every (output, chunk) its own block, which writes its fold to a scratch array; pass 2
// gives every output one block that folds its `splits` partials with the same block_reduce. Both
// passes are the one kernel reduce_rows_kernel over a different source and sink. The chunks
// depend only on the shape, each fold runs along a fixed tree, and no float atomics are used, so
// the result is the same on every run. argmax folds (value, index) candidates under a total
// order, which is what makes it splittable (ArgmaxOp).
#include <cmath>

#include "core/kernels.h"
#include "cuda/bad_index.cuh"
#include "cuda/block_reduce.cuh"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::ReduceOp;

// Fold element j of row o; a Source maps (o, j) to the value folded, a Sink stores a row's fold.
template <class Op, class Source, class Sink>
__global__ void reduce_rows_kernel(Source source, int64_t rows, int64_t k, int64_t splits, int64_t chunk, Sink sink) {
  for (int64_t b = blockIdx.x; b < rows * splits; b += gridDim.x) {  // uniform per block: block_reduce syncs
    const int64_t o = b / splits, begin = b % splits * chunk, len = k - begin < chunk ? k - begin : chunk;
    const auto total = block_reduce<Op>(len, [&](int64_t j) { return source(o, begin + j); });
    if (threadIdx.x == 0) sink(b, total);
  }
}

// Element j of output o of x seen as [outer, k, inner], converted to the fold's accumulator.
template <class T, class Acc>
struct StridedSource {
  const T* x;
  int64_t k, inner;
  __device__ Acc operator()(int64_t o, int64_t j) const {
    return static_cast<Acc>(x[(o / inner) * k * inner + o % inner + j * inner]);
  }
};

// Partial j of output o, written by pass 1.
template <class Acc>
struct PartialSource {
  const Acc* partial;
  int64_t splits;
  __device__ Acc operator()(int64_t o, int64_t j) const { return partial[o * splits + j]; }
};

template <class Acc>
struct PartialSink {
  Acc* partial;
  __device__ void operator()(int64_t b, Acc total) const { partial[b] = total; }
};

// How many chunks each of `rows` rows of k elements is cut into: enough blocks to fill the GPU
// (about 1024), but no chunk under 16 elements per thread. 1 means a block per row, one pass.
struct RowSplit {
  int64_t splits, chunk;
};
RowSplit split_rows(int64_t rows, int64_t k) {
  constexpr int64_t kTargetBlocks = 1024, kMinChunk = 16 * kBlockSize;
  const int64_t by_length = (k + kMinChunk - 1) / kMinChunk;
  const int64_t splits = std::max<int64_t>(1, std::min(by_length, kTargetBlocks / std::max<int64_t>(rows, 1)));
  return {splits, (k + splits - 1) / splits};
}

// Folds every row of `source` with Op and hands each row's result to `sink` (Note [Split
// reductions]); `rows` >= 1, k >= 1.
template <class Op, class Source, class Sink>
void reduce_rows(Device device, Source source, int64_t rows, int64_t k, Sink sink) {
  using Acc = typename Op::Acc;
  const RowSplit split = split_rows(rows, k);
  if (split.splits == 1) {
    launch_per_output(device, rows, reduce_rows_kernel<Op, Source, Sink>, source, rows, k, int64_t{1}, k, sink);
    return;
  }
  const int64_t count = rows * split.splits;
  const Tensor scratch = empty({count * static_cast<int64_t>(sizeof(Acc))}, TensorOptions(kUInt8).with_device(device));
  auto* partial = reinterpret_cast<Acc*>(scratch.raw_data());  // cudaMalloc blocks are 256-byte aligned
  launch_per_output(device, count, reduce_rows_kernel<Op, Source, PartialSink<Acc>>, source, rows, k, split.splits,
                    split.chunk, PartialSink<Acc>{partial});
  launch_per_output(device, rows, reduce_rows_kernel<Op, PartialSource<Acc>, Sink>,
                    PartialSource<Acc>{partial, split.splits}, rows, split.splits, int64_t{1}, split.splits, sink);
}

template <class T, class Acc>
struct ReduceSink {
  T* out;
  int64_t k;
  bool mean;
  __device__ void operator()(int64_t o, Acc total) const {
    out[o] = static_cast<T>(mean ? total / static_cast<Acc>(k) : total);
  }
};

template <class Op, class T>
void reduce_with(const T* x, int64_t outer, int64_t k, int64_t inner, T* out, bool mean, Device device) {
  using Acc = typename Op::Acc;
  reduce_rows<Op>(device, StridedSource<T, Acc>{x, k, inner}, outer * inner, k, ReduceSink<T, Acc>{out, k, mean});
}

void reduce_cuda(ReduceOp op, const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  if (outer * inner == 0) return;
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const Device d = out.device();
    switch (op) {
      case ReduceOp::Sum: return reduce_with<SumOp<T>>(px, outer, k, inner, po, false, d);
      case ReduceOp::Mean: return reduce_with<SumOp<T>>(px, outer, k, inner, po, true, d);
      case ReduceOp::Max: return reduce_with<ExtremumOp<T, true>>(px, outer, k, inner, po, false, d);
      case ReduceOp::Min: return reduce_with<ExtremumOp<T, false>>(px, outer, k, inner, po, false, d);
    }
  });
}

// argmax as a fold. The CPU walks k in order and moves to j when x[j] > x[best]: it returns the
// first maximum, and since nothing compares greater than a NaN and a NaN greater than nothing, a
// NaN wins only at index 0 and is skipped elsewhere. The same answer as a maximum under a total
// order: a NaN at index 0 first, then larger values, then smaller indices, with NaNs elsewhere
// left out (index -1, the identity). A maximum under a total order can be taken in any grouping,
// so the split passes give the CPU's index.
template <class T>
struct Candidate {  // no initialisers: block_reduce keeps these in __shared__ memory
  T value;
  int64_t index;  // -1: none
};

template <class T>
struct ArgmaxOp {
  using Acc = Candidate<T>;
  __device__ static Acc identity() { return {T(0), -1}; }
  __device__ static Acc step(Acc a, Acc b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (is_nan(a.value)) return a;  // only index 0 keeps a NaN
    if (is_nan(b.value)) return b;
    if (a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
};

template <class T>
struct ArgmaxSource {
  const T* x;
  int64_t k, inner;
  __device__ Candidate<T> operator()(int64_t o, int64_t j) const {
    const T v = x[(o / inner) * k * inner + o % inner + j * inner];
    return j > 0 && is_nan(v) ? ArgmaxOp<T>::identity() : Candidate<T>{v, j};
  }
};

template <class T>
struct ArgmaxSink {
  int64_t* out;
  __device__ void operator()(int64_t o, Candidate<T> best) const { out[o] = best.index; }
};

void argmax_cuda(const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  if (outer * inner == 0) return;
  dispatch(x.dtype(), [&]<class T>() {
    reduce_rows<ArgmaxOp<T>>(out.device(), ArgmaxSource<T>{x.data<T>(), k, inner}, outer * inner, k,
                             ArgmaxSink<T>{out.data<int64_t>()});
  });
}

// The row's maximum and sum_j exp(x_j - max) (in double for both float types), over its first
// `cols` elements scaled by `scale`.
template <class T>
struct RowStats {
  T max;
  double sum_exp;
};

template <class T>
__device__ RowStats<T> row_stats(const T* row, int64_t cols, T scale = T(1)) {
  const T m = block_reduce<ExtremumOp<T, true>>(cols, [&](int64_t j) { return row[j] * scale; });
  const double s =
      block_reduce<SumOp<T>>(cols, [&](int64_t j) { return static_cast<double>(exp(row[j] * scale - m)); });
  return {m, s};
}

// softmax_cpu's rows (core/cpu/reduce.cpp): the visible prefix of each row normalised, the masked
// rest 0 (-inf for log_softmax).
template <class T>
__global__ void softmax_kernel(const T* x, int64_t rows, int64_t cols, T* out, kernels::SoftmaxSpec spec) {
  const T scale = static_cast<T>(spec.scale);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * cols;
    T* o = out + r * cols;
    const int64_t n = spec.visible(r, cols);
    const RowStats<T> s = row_stats(in, n, scale);
    const T log_sum = static_cast<T>(log(s.sum_exp)), inv = static_cast<T>(1.0 / s.sum_exp);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const T v = in[j] * scale - s.max;
      if (j >= n) o[j] = spec.log ? ExtremumOp<T, true>::identity() : T(0);  // -inf or 0
      else o[j] = spec.log ? v - log_sum : exp(v) * inv;
    }
  }
}

void softmax_cuda(const Tensor& x, const Tensor& out, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    launch_per_output(out.device(), rows, softmax_kernel<T>, x.data<T>(), rows, cols, out.data<T>(), spec);
  });
}

// softmax_backward_cpu's rows: one block per row sums g * y (or g), then writes the row.
template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* g, int64_t rows, int64_t cols, T* gx,
                                        kernels::SoftmaxSpec spec) {
  const T scale = static_cast<T>(spec.scale);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *py = y + r * cols, *pg = g + r * cols;
    T* o = gx + r * cols;
    const int64_t n = spec.visible(r, cols);
    const T total = static_cast<T>(block_reduce<SumOp<T>>(n, [&](int64_t j) {
      return static_cast<double>(spec.log ? pg[j] : pg[j] * py[j]);
    }));
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      if (j >= n) o[j] = T(0);
      else o[j] = spec.log ? scale * (pg[j] - exp(py[j]) * total) : scale * (py[j] * (pg[j] - total));
    }
  }
}

void softmax_backward_cuda(const Tensor& y, const Tensor& g, const Tensor& gx, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = y.size(-1), rows = y.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(y.dtype(), "softmax_backward", [&]<class T>() {
    launch_per_output(gx.device(), rows, softmax_backward_kernel<T>, y.data<T>(), g.data<T>(), rows, cols,
                      gx.data<T>(), spec);
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
    kernels::add_kernel(kernels::softmax_backward, DeviceType::CUDA, &softmax_backward_cuda) &&
    kernels::add_kernel(kernels::cross_entropy_forward, DeviceType::CUDA, &cross_entropy_forward_cuda) &&
    kernels::add_kernel(kernels::cross_entropy_backward, DeviceType::CUDA, &cross_entropy_backward_cuda);

}  // namespace
}  // namespace ember::cuda
