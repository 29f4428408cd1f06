#pragma once
// Layer normalisation, forward and backward: the signatures and slots in the kernel table (Note
// [The kernel table] in core/kernel_table.h); the formulas are core/kernel_bodies/layer_norm.h.
#include "core/kernel_table.h"

namespace ember::kernels {

// x contiguous [rows, cols], normalised over cols: out = (x - mean) * rstd * weight + bias, with
// weight/bias [cols] or undefined; writes the statistics mean[rows] and rstd[rows] =
// 1 / sqrt(biased variance + eps), in x's dtype (Note [Layer-norm statistics]).
using LayerNormFwdFn = void(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                            const Tensor& mean, const Tensor& rstd);
// Writes grad_x [rows, cols] and, where defined, grad_weight and grad_bias [cols] (Note
// [Layer-norm backward]).
using LayerNormBwdFn = void(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                            const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                            const Tensor& grad_bias);

inline Kernel<LayerNormFwdFn> layer_norm_forward{"layer_norm_forward", Writes{4, 5, 6}};
inline Kernel<LayerNormBwdFn> layer_norm_backward{"layer_norm_backward", Writes{5, 6, 7}};

}  // namespace ember::kernels
