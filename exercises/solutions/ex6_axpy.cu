// Exercise 6 (b), the reference solution: one thread per element, in a grid-stride loop.
#include "cuda/check.h"
#include "cuda/context.h"
#include "ex6_cuda_kernel.h"

namespace ember::exercises {
namespace {

// The index is computed in int64: blockIdx.x * blockDim.x is an unsigned 32-bit product, which
// wraps for tensors of more than 2^32 elements. With n larger than the grid, each thread goes
// on by the grid's size, so one launch covers any n.
__global__ void axpy_kernel(int64_t n, float alpha, const float* x, const float* y, float* out) {
  const int64_t grid = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid)
    out[i] = alpha * x[i] + y[i];
}

}  // namespace

// The kernel runs on ember's one stream of the device (Note [One stream per device] in
// cuda/context.h), so it is ordered after the work that wrote x and y, and the caching allocator
// may hand out their blocks again once the host drops them. A launch reports a bad configuration
// only through cudaGetLastError.
Tensor axpy_cuda(double alpha, const Tensor& x, const Tensor& y) {
  check_axpy_arguments(x, y);
  Tensor out = empty(x.shape(), TensorOptions(kFloat32).with_device(x.device()));
  const LaunchShape shape = launch_shape(x.numel(), kAxpyThreadsPerBlock, kAxpyMaxBlocks);
  if (shape.blocks == 0) return out;
  const int index = x.device().index;
  cuda::DeviceGuard guard(index);
  axpy_kernel<<<static_cast<unsigned>(shape.blocks), static_cast<unsigned>(shape.threads_per_block), 0,
                cuda::stream(index)>>>(x.numel(), static_cast<float>(alpha), x.data<float>(), y.data<float>(),
                                       out.data<float>());
  CUDA_CHECK(cudaGetLastError());
  return out;
}

}  // namespace ember::exercises
