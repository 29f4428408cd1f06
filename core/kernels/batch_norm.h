#pragma once
// Batch normalisation (Note [Batch-norm forward slots] in core/ops/batch_norm.cpp): its signatures
// and slots in the kernel table (Note [The kernel table] in core/kernel_table.h), the running
// statistics a training forward moves, and the forwards composed of the parts.
#include <cstdint>

#include "core/kernel_table.h"
#include "core/through_float32.h"

namespace ember::kernels {

// x contiguous seen as [n, c, s]: per-channel mean and biased variance (float, [c])
using BatchNormStatsFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& var);
// out = (x - mean[c]) * invstd[c] * weight[c] + bias[c] (weight/bias may be undefined)
using BatchNormApplyFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean,
                              const Tensor& invstd, const Tensor& weight, const Tensor& bias, const Tensor& out);
// Training-mode backward (batch statistics): writes grad_x and, where defined, grad_weight and
// grad_bias ([c]).
using BatchNormBackwardFn = void(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                                 const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                 const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias);
// The running statistics a training forward moves towards the batch's: running = (1 - momentum)
// * running + momentum * batch, the variance unbiased (count / (count - 1) times the biased one,
// count = n * s > 1), as PyTorch. mean and var undefined: no update.
struct BatchNormRunning {
  Tensor mean, var;
  double momentum = 0.0;
};
namespace detail {
// How the table stages the running statistics of a 16-bit batch-norm forward (Note [Sixteen-bit
// floats through float32] in core/through_float32.h): they are written through the struct.
template <>
struct Staged<BatchNormRunning> {
  const BatchNormRunning& original;
  BatchNormRunning staged;
  Staged(const BatchNormRunning& r, bool) : original(r), staged(r) {
    if (stages(r.mean)) staged.mean = float32_copy(r.mean);
    if (stages(r.var)) staged.var = float32_copy(r.var);
  }
  const BatchNormRunning& argument() const { return staged; }
  void write_back() const {
    if (stages(original.mean)) convert_into(staged.mean, original.mean);
    if (stages(original.var)) convert_into(staged.var, original.var);
  }
  static DType sixteen_bit_dtype(const BatchNormRunning& r) {
    return stages(r.mean) ? r.mean.dtype() : stages(r.var) ? r.var.dtype() : kFloat32;
  }
};
}  // namespace detail
// Training-mode forward in one call (Note [Batch-norm forward slots] in core/ops/batch_norm.cpp): the
// batch statistics of x, mean and invstd = 1 / sqrt(biased var + eps) ([c], what the backward
// receives), out = (x - mean) * invstd * weight + bias, and the running update.
using BatchNormTrainFwdFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                                 const Tensor& bias, double eps, const BatchNormRunning& running, const Tensor& out,
                                 const Tensor& mean, const Tensor& invstd);
// Evaluation-mode forward: out = (x - running_mean) / sqrt(running_var + eps) * weight + bias.
using BatchNormEvalFwdFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                                const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                                const Tensor& out);
// The two forwards composed of batch_norm_stats, batch_norm_apply and ops, for any device: the CPU's
// slots, and the CUDA slots' path when cuDNN declines (core/ops/batch_norm.cpp).
void batch_norm_train_forward_by_parts(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                                       const Tensor& bias, double eps, const BatchNormRunning& running,
                                       const Tensor& out, const Tensor& mean, const Tensor& invstd);
void batch_norm_eval_forward_by_parts(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                                      const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                                      const Tensor& out);

inline Kernel<BatchNormStatsFn> batch_norm_stats{"batch_norm_stats", Writes{4, 5}};
inline Kernel<BatchNormApplyFn> batch_norm_apply{"batch_norm_apply", Writes{8}};
inline Kernel<BatchNormBackwardFn> batch_norm_backward{"batch_norm_backward", Writes{8, 9, 10}};
inline Kernel<BatchNormTrainFwdFn> batch_norm_train_forward{"batch_norm_train_forward", Writes{7, 8, 9, 10}};
inline Kernel<BatchNormEvalFwdFn> batch_norm_eval_forward{"batch_norm_eval_forward", Writes{9}};

}  // namespace ember::kernels
