#pragma once
// A row's maximum and its sum of exp(x - max), reduced by one block: the first half of softmax's
// rows (cuda/softmax.cu) and of cross-entropy's (cuda/cross_entropy.cu).
#include <cstdint>

#include "core/kernel_bodies/softmax.h"
#include "cuda/block_reduce.cuh"

namespace ember::cuda {

// Over the row's first `cols` elements scaled by `scale`; the sum in double for both float types.
template <class T>
struct RowStats {
  T max;
  double sum_exp;
};

template <class T>
__device__ RowStats<T> row_stats(const T* row, int64_t cols, T scale = T(1)) {
  const T m = block_reduce<ExtremumOp<T, true>>(cols, [&](int64_t j) { return row[j] * scale; });
  const double s = block_reduce<SumOp<T>>(
      cols, [&](int64_t j) { return static_cast<double>(exp(softmax_bodies::shifted(row[j], scale, m))); });
  return {m, s};
}

}  // namespace ember::cuda
