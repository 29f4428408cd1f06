#pragma once
// bfloat16 products on the CPU through oneDNN's matmul (core/cpu/dnnl_matmul.cpp, Note [bfloat16
// products through oneDNN]).
#include "core/kernels.h"

namespace ember::cpu {

// Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16), which the fast path needs.
bool cpu_has_bfloat16_products();

// The matmul kernel's contract (core/kernels/matmul.h) for bfloat16 a, c and out; returns whether
// it ran: false where oneDNN or this CPU does not take the case (built without oneDNN, no
// AVX512-BF16, the gemm backend set to OpenBLAS, an empty product), and the caller then stages it
// through float32.
bool matmul_bfloat16_dnnl(const Tensor& a, const Tensor& c, const Tensor& out, bool accumulate);

// How many products the path has run: what the tests check it by.
int64_t dnnl_matmul_runs();

}  // namespace ember::cpu
