// Matmul on the CPU is OpenBLAS's sgemm/dgemm. A transposed view (column-major last two dims)
// is passed as a transpose flag rather than copied; batches whose right operand is shared
// (batch stride 0) and whose left operand is contiguous collapse into one large gemm.
#include <cblas.h>

#include <algorithm>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

CBLAS_TRANSPOSE trans(const kernels::GemmLayout& l) { return l.transposed ? CblasTrans : CblasNoTrans; }

template <class T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c, static_cast<int>(ldc));
  }
}

void matmul_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  dispatch_floating(a.dtype(), "matmul", [&]<class T>() {
    T* c = out.data<T>();
    if (k == 0) {
      std::fill(c, c + out.numel(), T(0));
      return;
    }
    const kernels::GemmLayout la = kernels::gemm_layout(a), lb = kernels::gemm_layout(b);
    if (batch > 1 && b.stride(0) == 0 && a.is_contiguous()) {
      gemm<T>(CblasNoTrans, trans(lb), batch * m, n, k, a.data<T>(), k, b.data<T>(), lb.ld, c, n);
      return;
    }
    for (int64_t i = 0; i < batch; ++i)
      gemm<T>(trans(la), trans(lb), m, n, k, a.data<T>() + i * a.stride(0), la.ld, b.data<T>() + i * b.stride(0),
              lb.ld, c + i * m * n, n);
  });
}

const bool registered = kernels::add_kernel(kernels::matmul, DeviceType::CPU, &matmul_cpu);

}  // namespace
}  // namespace ember::cpu
