#pragma once
// The fused attention kernels' slots in the kernel table (Note [The kernel table] in
// core/kernel_table.h; Note [Fused attention] in core/ops/fused_attention.cpp).
#include "core/kernel_bodies/fused_attention.h"
#include "core/kernel_table.h"

namespace ember::kernels {

// q [batch, L, E], k [batch, S, E], v [batch, S, Ev] contiguous; mask undefined, or the mask
// broadcast to the scores' [..., L, S] (any strides) that spec.mask describes, uint8 or of q's
// dtype. Writes out [batch, L, Ev] = softmax(scale * q k^T + mask) v with dropout of the weights,
// and lse [batch, L] (float32; float64 for float64 inputs), each row's log-sum-exp of its scaled
// and masked scores: +inf for a row that sees no key, whose output is 0.
using FusedAttentionFwdFn = void(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                 const AttentionSpec& spec, const Tensor& out, const Tensor& lse);
// The adjoint, from what the forward wrote (out, lse) and out's gradient g: writes (not
// accumulates) grad_q, grad_k, grad_v, contiguous in q's, k's and v's shapes.
using FusedAttentionBwdFn = void(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                 const AttentionSpec& spec, const Tensor& out, const Tensor& lse, const Tensor& g,
                                 const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v);

inline Kernel<FusedAttentionFwdFn> fused_attention_forward{"fused_attention_forward", Writes{5, 6}};
inline Kernel<FusedAttentionBwdFn> fused_attention_backward{"fused_attention_backward", Writes{8, 9, 10}};

}  // namespace ember::kernels
