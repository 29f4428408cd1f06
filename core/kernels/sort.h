#pragma once
// Sorting rows: the signature and slot in the kernel table (Note [The kernel table] in
// core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

// x contiguous viewed as [outer, n, inner]: indices [outer, k, inner] (int64) are the positions
// of the first k elements of each row in sorted order (ascending, or descending), NaN counting as
// the largest value and ties kept in index order (Note [Sort order])
using SortFn = void(const Tensor& x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool descending,
                    const Tensor& indices);

inline Kernel<SortFn> sort{"sort", Writes{6}};

}  // namespace ember::kernels
