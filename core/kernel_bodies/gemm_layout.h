#pragma once
// How the CPU and the CUDA matmul kernels (core/cpu/matmul.cpp, core/cpu/dnnl_matmul.cpp,
// cuda/matmul.cu) hand an operand to their BLAS: its layout and its batch. Host code, not a
// per-element body, but read the same way by both devices, so it lives with what they share.
#include <algorithm>
#include <cstdint>

#include "core/tensor.h"

namespace ember::kernels {

// How a BLAS reads the last two dims [rows, cols] of a matmul operand: row-major with leading
// dimension ld, or — a transposed view — column-major, passed as a transpose flag.
struct GemmLayout {
  bool transposed;
  int64_t ld;
};
inline GemmLayout gemm_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1), rs = t.stride(-2), cs = t.stride(-1);
  if (cs == 1 || cols == 1) return {false, std::max<int64_t>({rs, cols, 1})};
  return {true, std::max<int64_t>({cs, rows, 1})};  // rs == 1: column-major
}
// The batch of a matmul operand as two levels, outer x inner matrices, each level with its
// stride in elements: a 3-D operand is one outer level of 1.
struct GemmBatch {
  int64_t outer, inner, outer_stride, inner_stride;
  int64_t count() const { return outer * inner; }
  int64_t offset(int64_t i) const { return i / inner * outer_stride + i % inner * inner_stride; }
  // One level when the outer stride steps over whole inner groups (contiguous or broadcast).
  bool folds() const { return outer == 1 || outer_stride == inner * inner_stride; }
};
inline GemmBatch gemm_batch(const Tensor& t) {
  if (t.dim() == 4) return {t.size(0), t.size(1), t.stride(0), t.stride(1)};
  return {1, t.size(0), 0, t.stride(0)};
}

}  // namespace ember::kernels
