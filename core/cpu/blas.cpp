// The CPU backend's gemm (core/cpu/blas.h): OpenBLAS, or for float oneDNN's sgemm.
//
// Note [Two BLAS for one gemm]
// Debian's OpenBLAS (0.3.21) picks its kernels by the CPU model it recognises, and runs its
// Haswell (AVX2) kernels on a CPU it does not know, such as the AMD EPYC with AVX-512 this
// project is measured on. oneDNN's sgemm (the library is linked already, for convolutions)
// JIT-compiles its kernels for the instruction set the CPU reports, and there is much faster
// than OpenBLAS for the products of the example models, at 1 and 2 threads (bench/RESULTS.md,
// "Products through oneDNN"). So float products run on oneDNN when ember is built with it, and
// set_gemm_backend / EMBER_GEMM_BACKEND switch back to OpenBLAS, which tests/test_gemm_backends.cpp
// compares against. float64 stays on OpenBLAS: oneDNN has no dgemm.
//  - Both libraries run on the OpenMP team of ember's loops (docs/internals.md, "One thread
//    pool"), and called from inside an OpenMP region (the reference convolution's per-sample
//    products), both run on the calling thread: nested regions are inactive.
//  - oneDNN's products are bitwise the same for the same operands wherever they lie in memory
//    (checked for offsets of 1-15 floats), so recomputation under checkpointing stays exact.
//  - Both take row-major operands with a transpose flag and a leading dimension each, so the
//    choice is one branch per call. oneDNN's packing buffers come from its own allocator, as
//    OpenBLAS's do; ember's memory statistics count neither.
#include "core/cpu/blas.h"

#include <cblas.h>

#include <cstdint>

#include "core/check.h"
#include "core/ops.h"
#if EMBER_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace ember::cpu {
namespace {

CBLAS_TRANSPOSE cblas_op(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }

// OpenBLAS's interface counts in int.
int blas_int(int64_t v) {
  EMBER_CHECK(v <= INT32_MAX, "[gemm] OpenBLAS takes dimensions below 2^31, got ", v);
  return static_cast<int>(v);
}

// A product without elements, or an empty sum (k = 0: C = beta * C), which the libraries reject
// (their checks want a leading dimension >= 1) or skip. Returns whether it was one.
template <class T>
bool empty_product(int64_t m, int64_t n, int64_t k, T beta, T* c, int64_t ldc) {
  if (m > 0 && n > 0 && k > 0) return false;
  if (k > 0) return true;  // no elements
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  return true;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (empty_product(m, n, k, beta, c, ldc)) return;
#if EMBER_WITH_DNNL
  if (gemm_backend() == GemmBackend::OneDNN) {
    const dnnl_status_t status =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    EMBER_CHECK(status == dnnl_success, "[gemm] oneDNN's sgemm failed (status ", static_cast<int>(status),
                ") on [", m, ", ", k, "] x [", k, ", ", n, "]");
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, cblas_op(trans_a), cblas_op(trans_b), blas_int(m), blas_int(n), blas_int(k), 1.0f, a,
              blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
          int64_t ldb, double beta, double* c, int64_t ldc) {
  if (empty_product(m, n, k, beta, c, ldc)) return;
  cblas_dgemm(CblasRowMajor, cblas_op(trans_a), cblas_op(trans_b), blas_int(m), blas_int(n), blas_int(k), 1.0, a,
              blas_int(lda), b, blas_int(ldb), beta, c, blas_int(ldc));
}

}  // namespace ember::cpu
