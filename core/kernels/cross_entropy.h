#pragma once
// The fused softmax cross-entropy (Note [Fused cross-entropy] in core/ops/loss.cpp) and the class
// targets of nll_loss: their signatures and slots in the kernel table (Note [The kernel table] in
// core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

// logits contiguous [N, C], target int64 [N]; writes per-sample loss[N] and logsumexp[N].
// Samples whose target is ignore_index get loss 0. smoothing is label smoothing in [0, 1).
using CrossEntropyFwdFn = void(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                               double smoothing, const Tensor& loss, const Tensor& lse);
// grad_logits[n, c] = grad_loss[n] * (softmax[n, c] - target distribution[n, c])
using CrossEntropyBwdFn = void(const Tensor& logits, const Tensor& target, const Tensor& lse,
                               const Tensor& grad_loss, int64_t ignore_index, double smoothing,
                               const Tensor& grad_logits);
// target contiguous int64; safe (target's shape) = target, with 0 where it is ignore_index, so that
// safe indexes a class (nll_loss). A target outside [0, classes) that is not ignored is a user
// error: the CPU op rejects it before the call; the CUDA kernel records it (Note [Index errors
// found on the device] in cuda/bad_index.h) and writes 0.
using ClassTargetsFn = void(const Tensor& target, int64_t classes, int64_t ignore_index, const Tensor& safe);

inline Kernel<CrossEntropyFwdFn> cross_entropy_forward{"cross_entropy_forward", Writes{4, 5}};
inline Kernel<CrossEntropyBwdFn> cross_entropy_backward{"cross_entropy_backward", Writes{6}};
inline Kernel<ClassTargetsFn> class_targets{"class_targets", Writes{3}};

}  // namespace ember::kernels
