#pragma once
// The CPU convolution through oneDNN (core/cpu/dnnl_conv.cpp, Note [Convolution through oneDNN]).
// Each function has the contract of the kernel it stands in for (core/kernels/conv_pool.h) and
// returns whether it ran: false where oneDNN does not take the case (neither float32 nor, on a CPU
// with AVX512-BF16, bfloat16; an empty dimension; a geometry it rejects), and the caller then runs
// ember's im2col kernel (staged through float32 for bfloat16). Built without oneDNN
// (EMBER_DNNL=OFF), they always return false.
#include "core/kernels.h"

namespace ember::cpu {

bool conv2d_forward_dnnl(const Tensor& x, const Tensor& weight, const kernels::Window2d& g, const Tensor& out);
// Computes the gradients that are defined, or none of them (false) where oneDNN does not take one:
// the caller's kernel then computes them all.
bool conv2d_backward_dnnl(const Tensor& grad, const Tensor& x, const Tensor& weight, const kernels::Window2d& g,
                          const Tensor& grad_x, const Tensor& grad_weight);

// What the tests check the cache by: the convolutions oneDNN has run, and the geometries the
// cache holds (those oneDNN rejected too).
struct DnnlConvCounts {
  int64_t runs;
  size_t cached;
};
DnnlConvCounts dnnl_conv_counts();

}  // namespace ember::cpu
