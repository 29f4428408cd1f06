// CPU kernel of sort, argsort and topk: the sorted positions of each row of [outer, n, inner].
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/cpu/parallel.h"
#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// Note [Sort order]
// Elements are ordered as PyTorch orders them: by value, NaN above +inf (so NaNs come last in an
// ascending sort and first in a descending one), and equal values (NaNs among themselves, -0.0
// and 0.0) in the order of their positions. Comparing (value, position) pairs is a strict total
// order, so any sorting algorithm gives the one answer a stable sort gives: the result is
// deterministic, and the first k of a partial sort (topk) are exactly the first k of the full
// sort.
template <class T>
bool precedes(T a, T b, bool descending) {
  using math::is_nan_value;
  if (descending) return !is_nan_value(b) && (is_nan_value(a) || a > b);
  return !is_nan_value(a) && (is_nan_value(b) || a < b);
}

void sort_cpu(const Tensor& x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool descending,
              const Tensor& indices) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    int64_t* pi = indices.data<int64_t>();
    parallel_for(outer * inner, outer * n * inner, [&](int64_t row) {
      const int64_t o = row / inner, i = row % inner;
      const T* base = px + o * n * inner + i;
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), int64_t{0});
      auto before = [&](int64_t a, int64_t b) {
        const T va = base[a * inner], vb = base[b * inner];
        if (precedes(va, vb, descending)) return true;
        if (precedes(vb, va, descending)) return false;
        return a < b;
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      int64_t* out = pi + o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) out[j * inner] = order[static_cast<size_t>(j)];
    });
  });
}

const bool registered = kernels::add_kernel(kernels::sort, DeviceType::CPU, &sort_cpu);

}  // namespace
}  // namespace ember::cpu
