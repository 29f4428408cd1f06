// Exercise 6 (b): a CUDA elementwise kernel, out = alpha * x + y. Read exercises/README.md
// (exercise 6) first, and cuda/loops.cuh (for_each_kernel, for_each) for how ember's own
// elementwise kernels are written and launched.
#include "cuda/check.h"
#include "cuda/context.h"
#include "ex6_cuda_kernel.h"
#include "not_implemented.h"

namespace ember::exercises {

// Write the __global__ kernel here: a grid-stride loop over n elements.

// Check the arguments (check_axpy_arguments), allocate the output on x's device, compute the
// launch shape with launch_shape(), launch the kernel on cuda::stream(device index) under a
// cuda::DeviceGuard, and report a failed launch with CUDA_CHECK(cudaGetLastError()).
Tensor axpy_cuda(double alpha, const Tensor& x, const Tensor& y) {
  (void)alpha;
  (void)x;
  (void)y;
  not_implemented(6);
}

}  // namespace ember::exercises
