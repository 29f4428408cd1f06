// CUDA kernel of cumsum, with the results of core/cpu/cumsum.cpp bit for bit. x is contiguous,
// seen as [outer, n, inner], and summed along n.
//
// Note [Cumsum one row per thread]
// Each (outer, inner) row is one thread that walks it in order, from the front or the back, with
// the CPU's row body (core/kernel_bodies/cumsum.h, Note [Integer cumsum wraps]): the CPU's
// additions in the CPU's order, so the results are equal bitwise. A
// parallel scan would associate the additions differently and round differently. Neighbouring
// threads hold neighbouring inner positions, so for inner > 1 each step reads contiguous memory;
// a few very long rows use few threads, which is the price of the CPU's order.
#include "core/kernel_bodies/cumsum.h"
#include "core/kernels.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

void cumsum_cuda(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    for_each(out.device(), outer * inner, cumsum_bodies::CumsumRow<T>{x.data<T>(), n, inner, reverse, out.data<T>()});
  });
}

const bool registered = kernels::add_kernel(kernels::cumsum, DeviceType::CUDA, &cumsum_cuda);

}  // namespace
}  // namespace ember::cuda
