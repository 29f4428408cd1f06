#pragma once
// The elementwise kernels' signatures and slots in the kernel table (Note [The kernel table] in
// core/kernel_table.h): fill, copy, the copy between devices, the unary and binary math, where,
// and dropout's masked scale.
#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernel_table.h"

namespace ember::kernels {

// UnaryOp and BinaryOp, the elementwise ops, are declared with their math in
// core/kernel_bodies/elementwise_math.h.

// out = value
using FillFn = void(const Tensor& out, double value);
// dst = src (same shape and device; any strides; converts dtype)
using CopyFn = void(const Tensor& src, const Tensor& dst);
// contiguous dst = contiguous src, across devices (registered by a device backend)
using TransferFn = void(const Tensor& src, const Tensor& dst);
// out = op(x, a, b); x has out's shape and dtype
using UnaryFn = void(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b);
// out = op(x, y); x and y have out's shape and one dtype; out is uint8 for comparisons
using BinaryFn = void(BinaryOp op, const Tensor& x, const Tensor& y, const Tensor& out);
// out = cond ? x : y; all of out's shape; cond is uint8
using WhereFn = void(const Tensor& cond, const Tensor& x, const Tensor& y, const Tensor& out);
// x, mask (uint8) and out contiguous, one shape: out = mask ? x * scale : 0 (dropout)
using MaskedScaleFn = void(const Tensor& x, const Tensor& mask, double scale, const Tensor& out);

inline Kernel<FillFn> fill{"fill", Writes{0}};
inline Kernel<CopyFn> copy{"copy", Writes{1}};
inline Kernel<TransferFn> transfer{"transfer", Writes{1}};
inline Kernel<UnaryFn> unary{"unary", Writes{2}};
inline Kernel<BinaryFn> binary{"binary", Writes{3}};
inline Kernel<WhereFn> where{"where", Writes{3}};
inline Kernel<MaskedScaleFn> masked_scale{"masked_scale", Writes{3}};

}  // namespace ember::kernels
