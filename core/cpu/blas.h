#pragma once
// The CPU backend's one door to BLAS: row-major sgemm/dgemm, C = op(A) @ op(B) + beta * C.
// Called outside an OpenMP region, OpenBLAS (its OpenMP build) spreads the product over the
// thread team; called from inside one, it runs on the calling thread.
#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace ember::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "BLAS has float and double gemm only");
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), 1.0f, a, i(lda), b, i(ldb), beta, c, i(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), 1.0, a, i(lda), b, i(ldb), beta, c, i(ldc));
  }
}

}  // namespace ember::cpu
