// Matmul on CUDA is cuBLAS's sgemm/dgemm (GemmEx for the 16-bit floats), with the layout logic of core/cpu/matmul.cpp: a
// transposed view (column-major last two dims) is passed as a transpose flag rather than
// copied, a batch is one strided-batched call per outer group (Note [Two batch levels] in
// core/ops/matmul.cpp; batch strides may be 0), and a batch whose right operand is shared and
// whose left operand is contiguous collapses into one large gemm.
//
// Note [Row-major gemm on column-major cuBLAS]
// cuBLAS is column-major, ember is row-major. A row-major [r, c] matrix with row stride ld is,
// byte for byte, the column-major [c, r] matrix with leading dimension ld: its transpose. So
// C = op(A) op(B) in row-major is C^T = op(B)^T op(A)^T in column-major, which is exactly what
// cuBLAS computes when handed B first, then A, with m and n swapped. Each operand keeps its own
// transpose flag: a transposed view stays "transposed" after the swap.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "core/kernel_bodies/gemm_layout.h"
#include "core/kernels.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace ember::cuda {
namespace {

using kernels::GemmLayout;

cublasOperation_t op(const GemmLayout& l) { return l.transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

// cuBLAS takes int sizes; ember's are int64.
int to_int(int64_t v, const char* what) {
  EMBER_CHECK(v >= 0 && v <= INT_MAX, "[matmul] ", what, " = ", v, " does not fit the 32-bit sizes of cuBLAS");
  return static_cast<int>(v);
}

// Note [Sixteen-bit products on cuBLAS]
// bfloat16 and float16 operands go to cublasGemmStridedBatchedEx with float32 accumulation
// (CUBLAS_COMPUTE_32F, float alpha and beta): the tensor cores multiply the 16-bit inputs and add
// the products in float32, and each output rounds to its dtype once, as the staged path (convert,
// sgemm, round: Note [Sixteen-bit floats through float32]) does, without its float32 copies of
// the operands. Accumulating in 16 bits would lose the small terms of a long sum (docs/internals.md,
// chapter 10). One exception is left as cuBLAS's default, which PyTorch's default also allows
// (its allow_bf16/fp16_reduced_precision_reduction): where cuBLAS splits a long k into parts
// (split-K), it may add the parts' float32 sums in the 16-bit output type, rounding more than
// once; CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION would forbid it.
template <class T>
constexpr cudaDataType_t kSixteenBitType = std::is_same_v<T, bfloat16> ? CUDA_R_16BF : CUDA_R_16F;

// The type of alpha and beta: float for the 16-bit dtypes (their compute type), else T.
template <class T>
using GemmScalar = std::conditional_t<is_sixteen_bit_float<T>, float, T>;

// Row-major out[i] = op(a[i]) @ op(b[i]) for i < batch, out[i] contiguous [m, n] (see the Note).
template <class T>
void gemm_batched(cublasHandle_t handle, GemmLayout la, GemmLayout lb, int64_t batch, int64_t m, int64_t n,
                  int64_t k, const T* a, int64_t stride_a, const T* b, int64_t stride_b, T* out, GemmScalar<T> beta) {
  const GemmScalar<T> one = 1;
  const int im = to_int(m, "m"), in = to_int(n, "n"), ik = to_int(k, "k"), count = to_int(batch, "batch");
  const int lda = to_int(la.ld, "lda"), ldb = to_int(lb.ld, "ldb");
  if constexpr (std::is_same_v<T, float>) {
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle, op(lb), op(la), in, im, ik, &one, b, ldb, stride_b, a, lda,
                                           stride_a, &beta, out, in, m * n, count));
  } else if constexpr (std::is_same_v<T, double>) {
    CUBLAS_CHECK(cublasDgemmStridedBatched(handle, op(lb), op(la), in, im, ik, &one, b, ldb, stride_b, a, lda,
                                           stride_a, &beta, out, in, m * n, count));
  } else {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, op(lb), op(la), in, im, ik, &one, b, kSixteenBitType<T>, ldb,
                                            stride_b, a, kSixteenBitType<T>, lda, stride_a, &beta, out,
                                            kSixteenBitType<T>, in, m * n, count, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
  }
}


void matmul_cuda(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const kernels::GemmBatch ba = kernels::gemm_batch(a), bb = kernels::gemm_batch(b);
  const int64_t batch = ba.count(), m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const int index = out.device().index;
  DeviceGuard guard(index);
  if (k == 0) {  // an empty sum: zeros (all-zero bytes are 0.0 in IEEE floats), or the bias as it is
    if (!accumulate) CUDA_CHECK(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), stream(index)));
    return;
  }
  cublasHandle_t handle = cublas_handle(index);
  dispatch_floating_or_sixteen_bit(a.dtype(), "matmul", [&]<class T>() {  // 16-bit: see the Note
    const GemmLayout la = kernels::gemm_layout(a), lb = kernels::gemm_layout(b);
    const GemmScalar<T> beta = accumulate ? 1 : 0;
    if (batch > 1 && bb.outer_stride == 0 && bb.inner_stride == 0 && a.is_contiguous()) {  // [batch * m, k] @ [k, n]
      gemm_batched<T>(handle, GemmLayout{false, k}, lb, 1, batch * m, n, k, a.data<T>(), 0, b.data<T>(), 0,
                      out.data<T>(), beta);
      return;
    }
    if (ba.folds() && bb.folds()) {  // one level: one strided-batched call
      gemm_batched<T>(handle, la, lb, batch, m, n, k, a.data<T>(), ba.inner_stride, b.data<T>(), bb.inner_stride,
                      out.data<T>(), beta);
      return;
    }
    // cuBLAS takes one batch stride per operand: one strided-batched call per outer group.
    for (int64_t o = 0; o < ba.outer; ++o)
      gemm_batched<T>(handle, la, lb, ba.inner, m, n, k, a.data<T>() + o * ba.outer_stride, ba.inner_stride,
                      b.data<T>() + o * bb.outer_stride, bb.inner_stride, out.data<T>() + o * ba.inner * m * n, beta);
  });
}

const bool registered =
    kernels::add_kernel(kernels::matmul, DeviceType::CUDA, &matmul_cuda, kernels::SixteenBit::Native);

}  // namespace
}  // namespace ember::cuda
