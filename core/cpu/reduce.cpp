// CPU kernels that reduce along one axis: sum/mean/max/min and argmax (softmax and the fused
// cross-entropy, which reduce rows too, are in softmax.cpp and cross_entropy.cpp). Inputs are
// contiguous and seen as [outer, k, inner]. Sums run in float lanes folded into double block by
// block (Note [Lane reductions] in core/cpu/lane_reductions.h), and every loop runs through simd_dispatch (Note
// [SIMD dispatch]).
#include <algorithm>
#include <vector>

#include "core/cpu/lane_reductions.h"
#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using kernels::ReduceOp;

// Note [Parallel full reduction]
// A reduction over one long row (sum(x) of a whole tensor is [1, numel, 1]) cuts the row into
// its blocks, reduces the blocks on the whole thread team, then folds the block results in block
// order on one thread. Those are exactly the operations reduce_row performs on one thread, in the
// same order, so the result is bitwise the same for any number of threads and any scheduling.
template <class Op, class T>
typename Op::Total reduce_long_row(const T* x, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<typename Op::Total> partial(static_cast<size_t>(blocks));
  parallel_for(blocks, n, [&](int64_t b) {
    partial[static_cast<size_t>(b)] =
        simd_dispatch([&] { return reduce_block<Op>(b * kBlock, std::min(kBlock, n - b * kBlock), load_from(x)); });
  });
  typename Op::Total total = Op::identity();
  for (const auto& p : partial) total = Op::fold(total, p);
  return total;
}

// Reduces the middle axis of x [outer, k, inner] into out [outer, inner]; finish(total) gives the
// output value (the mean divides there).
template <class Op, class T, class Finish>
void reduce_typed(const T* x, int64_t outer, int64_t k, int64_t inner, T* out, Finish finish) {
  using Lane = typename Op::Lane;
  using Total = typename Op::Total;
  if (inner == 1 && outer == 1) {
    out[0] = finish(reduce_long_row<Op>(x, k));
    return;
  }
  if (inner == 1) {  // contiguous rows, one per task
    parallel_for(outer, outer * k, [&](int64_t o) {
      out[o] = finish(simd_dispatch([&] { return reduce_row<Op>(k, load_from(x + o * k)); }));
    });
    return;
  }
  // Columns: walk k in the middle so the inner loop runs along contiguous memory; each task takes
  // up to kColumns columns of one outer index, and each accumulator folds into its double total
  // every kLaneRun rows (Note [Lane reductions]). Wide tasks matter: with 256 columns (1 KiB of
  // each 4 KiB row) sum over dim 0 of [4096, 1024] took several times longer than with 1024
  // (bench/RESULTS.md, "CPU kernels after tuning"), as every short segment starts on a new page
  // where the hardware prefetcher starts over.
  constexpr int64_t kColumns = 1024;
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
  parallel_for(outer * chunks, outer * k * inner, [&](int64_t t) {
    const int64_t o = t / chunks, begin = (t % chunks) * kColumns, len = std::min(kColumns, inner - begin);
    const T* base = x + o * k * inner + begin;
    simd_dispatch([&] {
      Lane acc[kColumns];
      Total total[kColumns];
      for (int64_t i = 0; i < len; ++i) total[i] = Op::identity();
      for (int64_t j0 = 0; j0 < k; j0 += kLaneRun) {
        for (int64_t i = 0; i < len; ++i) acc[i] = Op::identity();
        for (int64_t j = j0; j < std::min(k, j0 + kLaneRun); ++j) {
          const T* row = base + j * inner;
          for (int64_t i = 0; i < len; ++i) acc[i] = Op::step(acc[i], row[i]);
        }
        for (int64_t i = 0; i < len; ++i) total[i] = Op::fold(total[i], acc[i]);
      }
      for (int64_t i = 0; i < len; ++i) out[o * inner + begin + i] = finish(total[i]);
    });
  });
}

void reduce_cpu(ReduceOp op, const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    auto as_is = [](auto total) { return static_cast<T>(total); };
    switch (op) {
      case ReduceOp::Sum: return reduce_typed<SumOp<T>>(px, outer, k, inner, po, as_is);
      case ReduceOp::Mean: {
        const auto count = static_cast<typename SumOp<T>::Total>(k);
        auto divide = [count](auto total) { return static_cast<T>(total / count); };
        return reduce_typed<SumOp<T>>(px, outer, k, inner, po, divide);
      }
      case ReduceOp::Max: return reduce_typed<MaxOp<T>>(px, outer, k, inner, po, as_is);
      case ReduceOp::Min: return reduce_typed<MinOp<T>>(px, outer, k, inner, po, as_is);
    }
  });
}

void argmax_cpu(const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    int64_t* po = out.data<int64_t>();
    parallel_for(outer * inner, outer * k * inner, [&](int64_t t) {
      const int64_t o = t / inner, i = t % inner;
      const T* base = px + o * k * inner + i;
      // A scan in index order under Note [Argmax under a total order]; nothing comes before a
      // NaN, so the scan stops at the first.
      int64_t best = 0;
      for (int64_t j = 1; j < k && !math::is_nan_value(base[best * inner]); ++j)
        if (math::argmax_prefers(base[j * inner], j, base[best * inner], best)) best = j;
      po[t] = best;
    });
  });
}

const bool registered =
    kernels::add_kernel(kernels::reduce, DeviceType::CPU, &reduce_cpu) &&
    kernels::add_kernel(kernels::argmax, DeviceType::CPU, &argmax_cpu);

}  // namespace
}  // namespace ember::cpu
