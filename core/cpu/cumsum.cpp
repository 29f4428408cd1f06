// CPU kernel of cumsum: running sums along the middle dim of [outer, n, inner].
#include <type_traits>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// Floats add in double and round each running sum once, as PyTorch's CPU kernel does, so a long
// float32 row does not drift; integers add in int64.
void cumsum_cpu(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    using Sum = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(outer * inner, outer * n * inner, [&](int64_t row) {
      const int64_t base = (row / inner) * n * inner + row % inner;
      Sum total = 0;
      for (int64_t step = 0; step < n; ++step) {
        const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
        total += static_cast<Sum>(px[at]);
        po[at] = static_cast<T>(total);
      }
    });
  });
}

const bool registered = kernels::add_kernel(kernels::cumsum, DeviceType::CPU, &cumsum_cpu);

}  // namespace
}  // namespace ember::cpu
