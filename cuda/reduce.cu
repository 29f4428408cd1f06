// CUDA kernels that reduce along one axis, sum/mean/max/min and argmax, with the semantics of
// core/cpu/reduce.cpp. Inputs are contiguous and seen as [outer, k, inner]. Each output is one
// block's fold (Note [One block per output] in cuda/block_reduce.cuh), or two passes' when rows
// are few and long:
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

// argmax as a fold under Note [Argmax under a total order], so the split passes give the CPU's
// index.
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
    return math::argmax_prefers(b.value, b.index, a.value, a.index) ? b : a;
  }
};

template <class T>
struct ArgmaxSource {
  const T* x;
  int64_t k, inner;
  __device__ Candidate<T> operator()(int64_t o, int64_t j) const {
    return Candidate<T>{x[(o / inner) * k * inner + o % inner + j * inner], j};
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

const bool registered =
    kernels::add_kernel(kernels::reduce, DeviceType::CUDA, &reduce_cuda) &&
    kernels::add_kernel(kernels::argmax, DeviceType::CUDA, &argmax_cuda);

}  // namespace
}  // namespace ember::cuda
