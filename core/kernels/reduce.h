#pragma once
// The reductions along one dim, reduce (sum, mean, max, min) and argmax: their signatures and
// slots in the kernel table (Note [The kernel table] in core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

enum class ReduceOp { Sum, Mean, Max, Min };
// x contiguous viewed as [outer, k, inner]; out[outer, inner] = op over k
using ReduceFn = void(ReduceOp op, const Tensor& x, int64_t outer, int64_t k, int64_t inner,
                      const Tensor& out);
// like reduce, writing the int64 index of the maximum (first one on ties)
using ArgmaxFn = void(const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out);

inline Kernel<ReduceFn> reduce{"reduce", Writes{5}};
inline Kernel<ArgmaxFn> argmax{"argmax", Writes{4}};

}  // namespace ember::kernels
