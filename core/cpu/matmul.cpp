// Matmul on the CPU is BLAS's gemm (core/cpu/blas.h), one call per matrix of the batch. A transposed
// view (column-major last two dims) is passed as a transpose flag rather than copied, and so is a
// row stride larger than the row (ld); batches whose right operand is shared (batch strides 0)
// and whose left operand is contiguous collapse into one large gemm.

#include "core/cpu/blas.h"
#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

void matmul_cpu(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const kernels::GemmBatch ba = kernels::gemm_batch(a), bb = kernels::gemm_batch(b);
  const int64_t batch = ba.count(), m = a.size(-2), k = a.size(-1), n = b.size(-1);
  dispatch_floating(a.dtype(), "matmul", [&]<class T>() {
    T* c = out.data<T>();
    const T beta = accumulate ? T(1) : T(0);
    const kernels::GemmLayout la = kernels::gemm_layout(a), lb = kernels::gemm_layout(b);
    if (batch > 1 && bb.outer_stride == 0 && bb.inner_stride == 0 && a.is_contiguous()) {
      gemm(false, lb.transposed, batch * m, n, k, a.data<T>(), k, b.data<T>(), lb.ld, beta, c, n);
      return;
    }
    for (int64_t i = 0; i < batch; ++i)
      gemm(la.transposed, lb.transposed, m, n, k, a.data<T>() + ba.offset(i), la.ld, b.data<T>() + bb.offset(i),
              lb.ld, beta, c + i * m * n, n);
  });
}

const bool registered = kernels::add_kernel(kernels::matmul, DeviceType::CPU, &matmul_cpu);

}  // namespace
}  // namespace ember::cpu
