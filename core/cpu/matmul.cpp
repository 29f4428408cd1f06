// Matmul on the CPU is BLAS's gemm (core/cpu/blas.h), one call per matrix of the batch; bfloat16
// products go to oneDNN (Note [bfloat16 products through oneDNN]). A transposed
// view (column-major last two dims) is passed as a transpose flag rather than copied, and so is a
// row stride larger than the row (ld); batches whose right operand is shared (batch strides 0)
// and whose left operand is contiguous collapse into one large gemm.
#include <algorithm>
#include <cstdint>

#include "core/cpu/blas.h"
#include "core/cpu/dnnl_matmul.h"
#include "core/kernel_bodies/gemm_layout.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// Note [Small products side by side]
// Attention multiplies per head: a batch of 64 products of 128 x 32 by 32 x 128 in the GPT
// example. Products that small gain nothing from threads inside each one, and waking the thread
// team for each costs more than the product once the threads sleep between regions
// (OMP_WAIT_POLICY=PASSIVE, which the examples set): 64 of them took several times longer at 2
// threads than at 1 (bench/RESULTS.md, "Figures that code comments used to quote"). So a batch
// of small products runs one product per thread, the team woken once, and each product on its
// thread (a gemm inside an OpenMP region stays on its thread).
// Larger products run one after the other, each spread over the team by the library.
inline constexpr int64_t kSmallProduct = int64_t{1} << 21;  // m * n * k: 128 x 128 x 128

void matmul_cpu(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  if (a.dtype() == kBFloat16) {  // registered for bfloat16: oneDNN's products, or staged
    if (!matmul_bfloat16_dnnl(a, b, out, accumulate)) kernels::matmul.staged(&matmul_cpu, a, b, out, accumulate);
    return;
  }
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
    // Inside the region a gemm must not throw (an exception cannot leave it): leading dimensions
    // past OpenBLAS's int, which it reports as an error, take the loop outside.
    const bool side_by_side = batch > 1 && m * n * k <= kSmallProduct && std::max(la.ld, lb.ld) <= INT32_MAX;
#pragma omp parallel for if (side_by_side) schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      gemm(la.transposed, lb.transposed, m, n, k, a.data<T>() + ba.offset(i), la.ld, b.data<T>() + bb.offset(i),
           lb.ld, beta, c + i * m * n, n);
  });
}

const bool registered =
    kernels::add_kernel(kernels::matmul, DeviceType::CPU, &matmul_cpu, kernels::SixteenBit::BFloat16);

}  // namespace
}  // namespace ember::cpu
