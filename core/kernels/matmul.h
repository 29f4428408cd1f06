#pragma once
// The matrix product's signature and slot in the kernel table (Note [The kernel table] in
// core/kernel_table.h). How each device's BLAS reads the operands: core/kernel_bodies/gemm_layout.h.
#include "core/kernel_table.h"

namespace ember::kernels {

// out[b] = a[b] @ c[b] over a batch of one level, a: [B, M, K], c: [B, K, N], or of two,
// a: [B1, B2, M, K], c: [B1, B2, K, N] (Note [Two batch levels] in core/ops/matmul.cpp); out is
// contiguous with a's batch dims and [M, N]. The last two dims of a and c are row-major or
// column-major (a transposed view); batch strides may be 0. accumulate: out += a @ c (out holds a
// bias, Note [A bias in the product]).
using MatmulFn = void(const Tensor& a, const Tensor& c, const Tensor& out, bool accumulate);

inline Kernel<MatmulFn> matmul{"matmul", Writes{2}};

}  // namespace ember::kernels
