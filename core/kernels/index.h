#pragma once
// Indexing along one dim, index_select and gather, and their adjoints index_add and scatter_add:
// their signatures and slots in the kernel table (Note [The kernel table] in core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

// x contiguous viewed as [outer, k, inner]; out[outer, j, inner] = x[outer, index[j], inner]
using IndexSelectFn = void(const Tensor& x, const Tensor& index, int64_t outer, int64_t k,
                           int64_t inner, const Tensor& out);
// the adjoint: out[outer, index[j], inner] += src[outer, j, inner]; out already holds a value
using IndexAddFn = void(const Tensor& src, const Tensor& index, int64_t outer, int64_t k,
                        int64_t inner, const Tensor& out);
// x contiguous viewed as [outer, k, inner], index contiguous [outer, m, inner];
// out[o, j, i] = x[o, index[o, j, i], i]
using GatherFn = void(const Tensor& x, const Tensor& index, int64_t outer, int64_t k, int64_t inner,
                      const Tensor& out);
// the adjoint: out[o, index[o, j, i], i] += src[o, j, i]
using ScatterAddFn = void(const Tensor& src, const Tensor& index, int64_t outer, int64_t k,
                          int64_t inner, const Tensor& out);

inline Kernel<IndexSelectFn> index_select{"index_select", Writes{5}};
inline Kernel<IndexAddFn> index_add{"index_add", Writes{5}};
inline Kernel<GatherFn> gather{"gather", Writes{5}};
inline Kernel<ScatterAddFn> scatter_add{"scatter_add", Writes{5}};

}  // namespace ember::kernels
