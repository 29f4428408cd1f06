#pragma once
// Note [CUDA elementwise loops]
// Elementwise kernels (fill, copy, unary, binary) see operands of one shape with arbitrary
// strides: views, stride-0 broadcasts, and strided outputs for the in-place ops. Each thread
// takes linear indices i (row-major over the shape) and turns i into one element offset per
// operand by peeling off the sizes from the innermost dim outwards.
//
// Before the launch the dims are *coalesced* on the host exactly as on the CPU (Note [CPU
// elementwise loops]): size-1 dims are dropped and adjacent dims that every operand walks as one
// are merged. A contiguous tensor of any rank becomes one dim, whose offset is i times the
// stride with no division at all; a bias broadcast over a batch becomes two dims. The shape and
// the strides travel to the kernel by value in a small fixed-size struct (kMaxDims dims), so
// launching needs no device memory and no copy.
//
// The kernel is a grid-stride loop: the grid is capped, and each thread walks i, i + threads,
// ... so any element count works with one launch.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "core/convert.h"  // convert<To>: Note [Float to integer conversion]
#include "core/tensor.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace ember::cuda {

inline constexpr int kMaxDims = 8;
inline constexpr int kBlockSize = 256;
inline constexpr int64_t kMaxBlocks = 65535;

template <size_t N>
struct Offsets {
  int64_t at[N];  // element offset of operand k
};

template <size_t N>
struct Indexer {
  int ndim = 1;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};  // per operand, in elements

  __device__ Offsets<N> operator()(int64_t linear) const {
    Offsets<N> o{};
    for (int d = ndim - 1; d > 0; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (size_t k = 0; k < N; ++k) o.at[k] += i * strides[k][d];
    }
    for (size_t k = 0; k < N; ++k) o.at[k] += linear * strides[k][0];  // what is left is dim 0's index
    return o;
  }
};

// The coalesced layout of operands of one shape (ops[0]'s); `name` names the kernel in errors.
template <size_t N>
Indexer<N> make_indexer(const std::array<const Tensor*, N>& ops, const char* name) {
  const Shape& shape = ops[0]->shape();
  Shape sizes;
  std::array<Shape, N> strides;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move an offset
    bool merge = !sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = strides[k].back() == ops[k]->strides()[d] * shape[d];
    if (merge) {
      sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) strides[k].back() = ops[k]->strides()[d];
    } else {
      sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(ops[k]->strides()[d]);
    }
  }
  EMBER_CHECK(sizes.size() <= static_cast<size_t>(kMaxDims), "[", name, "] the CUDA kernel handles at most ",
              kMaxDims, " dims once contiguous dims are merged; shape ", shape_str(shape), " with strides ",
              shape_str(ops[0]->strides()), " has ", sizes.size(), " (make the operands contiguous first)");
  Indexer<N> index;
  if (sizes.empty()) {  // a 0-d tensor or all dims of size 1: one element at offset 0
    index.sizes[0] = 1;
    return index;
  }
  index.ndim = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    index.sizes[d] = sizes[d];
    for (size_t k = 0; k < N; ++k) index.strides[k][d] = strides[k][d];
  }
  return index;
}

template <class Body>
__global__ void for_each_kernel(int64_t n, Body body) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) body(i);
}

// Runs body(i) for every i in [0, n) on `device`'s stream. Body is a small struct passed to the
// kernel by value (pointers, an Indexer, scalars) with a __device__ operator()(int64_t).
template <class Body>
void for_each(Device device, int64_t n, const Body& body) {
  if (n <= 0) return;
  DeviceGuard guard(device.index);
  const int64_t blocks = std::min((n + kBlockSize - 1) / kBlockSize, kMaxBlocks);
  for_each_kernel<<<static_cast<unsigned>(blocks), kBlockSize, 0, stream(device.index)>>>(n, body);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
