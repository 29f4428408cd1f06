#pragma once
// Note [CPU elementwise loops]
// Elementwise kernels see operands of one shape but arbitrary strides (views, and stride-0
// broadcasts). for_each_row() first *coalesces* the dims: adjacent dims that every operand walks
// as one (stride[i] == stride[i+1] * shape[i+1]) are merged, so a contiguous tensor of any
// shape becomes one long row and a bias broadcast over a batch becomes a 2-D loop. The kernel
// body then runs once per row with a plain pointer-and-stride inner loop the compiler can
// vectorise when every inner stride is 1. Rows (or, for one long row, chunks of it) are spread
// over OpenMP threads; small tensors stay on one thread because waking the team costs more. Each
// thread finds its first row's pointers by division and then steps row to row like an odometer:
// rows can be as short as an attention head's 32 features.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/cpu/parallel.h"
#include "core/tensor.h"

namespace ember::cpu {

template <size_t N>
struct RowLayout {
  Shape shape;                       // coalesced; the last dim is the row
  std::array<Shape, N> strides;      // per operand, in elements
  std::array<char*, N> bases;        // per operand, element 0
  std::array<int64_t, N> elem_size;  // per operand
};

template <size_t N>
RowLayout<N> coalesce(const std::array<const Tensor*, N>& ops) {
  RowLayout<N> l;
  const Shape& shape = ops[0]->shape();
  for (size_t k = 0; k < N; ++k) {
    l.bases[k] = static_cast<char*>(ops[k]->raw_data());
    l.elem_size[k] = static_cast<int64_t>(element_size(ops[k]->dtype()));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move a pointer
    bool merge = !l.shape.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = l.strides[k].back() == ops[k]->strides()[d] * shape[d];
    if (merge) {
      l.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) l.strides[k].back() = ops[k]->strides()[d];
    } else {
      l.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) l.strides[k].push_back(ops[k]->strides()[d]);
    }
  }
  if (l.shape.empty()) {  // a 0-d tensor or all dims of size 1: one element
    l.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) l.strides[k].push_back(1);
  }
  return l;
}

// Calls body(ptrs, inner_strides, count) for every row of the operands (see the Note);
// ptrs[k] points at the row's first element of operand k.
template <size_t N, class Body>
void for_each_row(const std::array<const Tensor*, N>& ops, Body body) {
  RowLayout<N> l = coalesce(ops);
  const int64_t ndim = static_cast<int64_t>(l.shape.size());
  const int64_t row = l.shape.back();
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = l.strides[k].back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) rows *= l.shape[static_cast<size_t>(d)];
  const int64_t total = rows * row;
  if (total == 0) return;  // an empty dim: no row to visit (and none to divide by)
  if (rows == 1) {  // one long row: split it into chunks
    const int64_t chunks = total > kParallelGrain ? (total + kParallelGrain - 1) / kParallelGrain : 1;
#pragma omp parallel for if (chunks > 1) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t begin = c * row / chunks, end = (c + 1) * row / chunks;
      std::array<char*, N> p;
      for (size_t k = 0; k < N; ++k) p[k] = l.bases[k] + begin * inner[k] * l.elem_size[k];
      body(p, inner, end - begin);
    }
    return;
  }
  // Rows in chunks, one per thread (see the Note): no division per row, since three 64-bit
  // divisions cost more than copying a row of 32 features.
  const int64_t chunks = total > kParallelGrain ? std::min<int64_t>(rows, omp_get_max_threads()) : 1;
#pragma omp parallel for if (chunks > 1) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * rows / chunks, end = (c + 1) * rows / chunks;
    std::array<char*, N> p = l.bases;
    Shape index(static_cast<size_t>(ndim), 0);  // the row's position in the outer dims
    int64_t rem = begin;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      const auto du = static_cast<size_t>(d);
      index[du] = rem % l.shape[du];
      rem /= l.shape[du];
      for (size_t k = 0; k < N; ++k) p[k] += index[du] * l.strides[k][du] * l.elem_size[k];
    }
    for (int64_t r = begin; r < end; ++r) {
      body(p, inner, row);
      if (r + 1 == end) break;
      for (int64_t d = ndim - 2; d >= 0; --d) {  // the next row: carry through the outer dims
        const auto du = static_cast<size_t>(d);
        for (size_t k = 0; k < N; ++k) p[k] += l.strides[k][du] * l.elem_size[k];
        if (++index[du] < l.shape[du]) break;
        index[du] = 0;
        for (size_t k = 0; k < N; ++k) p[k] -= l.shape[du] * l.strides[k][du] * l.elem_size[k];
      }
    }
  }
}

}  // namespace ember::cpu
