#pragma once
// Running sums along one dim: the signature and slot in the kernel table (Note [The kernel table] in
// core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

// x contiguous viewed as [outer, n, inner], out of x's dtype: the running sums along n, from the
// front or (reverse) from the back; floats add in double
using CumsumFn = void(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, const Tensor& out);

inline Kernel<CumsumFn> cumsum{"cumsum", Writes{5}};

}  // namespace ember::kernels
