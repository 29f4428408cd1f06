#pragma once
// The CPU backend's one door to BLAS: row-major C = op(A) @ op(B) + beta * C, in float and
// double (core/cpu/blas.cpp). Called outside an OpenMP region, the library spreads the product
// over the thread team; called from inside one, it runs on the calling thread.
#include <cstdint>

namespace ember::cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
          int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace ember::cpu
