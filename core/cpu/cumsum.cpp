// CPU kernel of cumsum: running sums along the middle dim of [outer, n, inner], one row per
// task, with the row walk shared with CUDA (core/kernel_bodies/cumsum.h).
#include "core/cpu/parallel.h"
#include "core/kernel_bodies/cumsum.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

void cumsum_cpu(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    const cumsum_bodies::CumsumRow<T> row{x.data<T>(), n, inner, reverse, out.data<T>()};
    parallel_for(outer * inner, outer * n * inner, row);
  });
}

const bool registered = kernels::add_kernel(kernels::cumsum, DeviceType::CPU, &cumsum_cpu);

}  // namespace
}  // namespace ember::cpu
