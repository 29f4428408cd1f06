// CUDA kernel of cumsum, with the results of core/cpu/cumsum.cpp bit for bit. x is contiguous,
// seen as [outer, n, inner], and summed along n.
//
// Note [Cumsum one row per thread]
// Each (outer, inner) row is one thread that walks it in order, from the front or the back,
// adding floats in double (integers in int64) and rounding every running sum once to the
// output's type: the CPU's additions in the CPU's order, so the results are equal bitwise. A
// parallel scan would associate the additions differently and round differently. Neighbouring
// threads hold neighbouring inner positions, so for inner > 1 each step reads contiguous memory;
// a few very long rows use few threads, which is the price of the CPU's order.
#include <type_traits>

#include "core/kernels.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

template <class T>
struct CumsumBody {
  const T* x;
  int64_t n, inner;
  bool reverse;
  T* out;
  __device__ void operator()(int64_t row) const {
    using Sum = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const int64_t base = (row / inner) * n * inner + row % inner;
    Sum total = 0;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
      total += static_cast<Sum>(x[at]);
      out[at] = static_cast<T>(total);
    }
  }
};

void cumsum_cuda(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    for_each(out.device(), outer * inner, CumsumBody<T>{x.data<T>(), n, inner, reverse, out.data<T>()});
  });
}

const bool registered = kernels::add_kernel(kernels::cumsum, DeviceType::CUDA, &cumsum_cuda);

}  // namespace
}  // namespace ember::cuda
