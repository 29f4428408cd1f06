#pragma once
// Exercise 6: a CUDA elementwise kernel, out = alpha * x + y ("axpy"), in two parts.
//
// (a) On the host, the launch shape (compiled in every build, checked on the CPU): how many
//     blocks of `threads_per_block` threads a grid-stride loop over n elements gets. Every
//     element needs a thread, so blocks = ceil(n / threads_per_block), but never more than
//     max_blocks: the grid-stride loop lets each thread take elements i, i + grid, i + 2 grid,
//     ... when n outgrows the grid. n = 0 needs no launch (0 blocks). The arithmetic must not
//     overflow for any n up to INT64_MAX. A block size CUDA cannot run (more than 1024) or that
//     is not a whole number of 32-thread warps, a max_blocks below 1 or a negative n is an
//     ember::Error naming the function and the value.
// (b) On the device (CUDA builds only), axpy_cuda: the __global__ kernel and its launch, on
//     ember's stream for the tensors' device, with the shape from (a). Its test compares it with
//     ember's own ops and skips without a GPU.
// Both go in exercises/ex6_launch_shape.cpp and exercises/ex6_axpy.cu.
#include <cstdint>

// Only the tensor headers, not <ember/ember.h>: exercises/ex6_axpy.cu includes this file, and
// nvcc need not compile the whole library's headers for one kernel.
#include "core/check.h"
#include "core/tensor.h"

namespace ember::exercises {

struct LaunchShape {
  int64_t blocks = 0;
  int64_t threads_per_block = 0;
  bool operator==(const LaunchShape&) const = default;
};

inline constexpr int64_t kAxpyThreadsPerBlock = 256;
inline constexpr int64_t kAxpyMaxBlocks = 65535;  // what ember's own elementwise kernels cap at

LaunchShape launch_shape(int64_t n, int64_t threads_per_block, int64_t max_blocks);  // yours

#ifdef EMBER_WITH_CUDA
// alpha * x + y for contiguous float32 tensors of one shape on one CUDA device.
Tensor axpy_cuda(double alpha, const Tensor& x, const Tensor& y);  // yours

inline void check_axpy_arguments(const Tensor& x, const Tensor& y) {
  EMBER_CHECK(x.defined() && y.defined(), "[axpy_cuda] expects defined tensors");
  EMBER_CHECK(x.device().is_cuda() && x.device() == y.device(), "[axpy_cuda] expects x and y on one CUDA device, got ",
              x.device(), " and ", y.device());
  EMBER_CHECK(x.dtype() == kFloat32 && y.dtype() == kFloat32, "[axpy_cuda] expects float32 tensors, got ", x.dtype(),
              " and ", y.dtype());
  EMBER_CHECK(x.shape() == y.shape(), "[axpy_cuda] expects one shape, got ", shape_str(x.shape()), " and ",
              shape_str(y.shape()));
  EMBER_CHECK(x.is_contiguous() && y.is_contiguous(), "[axpy_cuda] expects contiguous tensors");
}
#endif

}  // namespace ember::exercises
