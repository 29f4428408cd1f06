#pragma once
// The embedding lookup and its adjoint: their signatures and slots in the kernel table (Note [The
// kernel table] in core/kernel_table.h).
#include "core/kernel_table.h"

namespace ember::kernels {

// weight contiguous [num, dim], indices contiguous int64 [n]: out[j] = weight[indices[j]]. The op
// checks ids it can see on the host; an id outside [0, num) that reaches a kernel gives a NaN row
// (Note [Embedding ids on the device]).
using EmbeddingFwdFn = void(const Tensor& weight, const Tensor& indices, const Tensor& out);
// The adjoint: grad_weight [num, dim] is written (not accumulated): row r is the sum of the
// grad[j] whose id is r, added in j order, zero for ids that never occur (Note [Embedding backward]).
using EmbeddingBwdFn = void(const Tensor& grad, const Tensor& indices, const Tensor& grad_weight);

inline Kernel<EmbeddingFwdFn> embedding_forward{"embedding_forward", Writes{2}};
inline Kernel<EmbeddingBwdFn> embedding_backward{"embedding_backward", Writes{2}};

}  // namespace ember::kernels
