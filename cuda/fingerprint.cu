// Tensor fingerprints on CUDA (Note [Tensor fingerprints]): a grid-stride loop sums each
// thread's words, each block folds its threads' sums, and the blocks add theirs into two 64-bit
// words with atomicAdd. Integer addition is exact and commutative, so this order of summation
// gives the very bits the CPU's loop gives; finish() runs on the host.
#include "core/kernel_bodies/fingerprint.h"
#include "core/kernels.h"
#include "cuda/block_reduce.cuh"

namespace ember::cuda {
namespace {

struct WrappingSum {
  using Acc = unsigned long long;  // atomicAdd's 64-bit type
  __device__ static Acc identity() { return 0; }
  __device__ static Acc step(Acc acc, Acc v) { return acc + v; }
};

// totals[0] += the plain sum, totals[1] += the weighted sum.
template <class T>
__global__ void fingerprint_kernel(const T* x, int64_t n, unsigned long long* totals) {
  fingerprint::Sums mine;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    fingerprint::add_element(mine, static_cast<uint64_t>(i), x[i]);
  // Thread j's load is its own sum: one value per thread, folded across the block.
  const unsigned long long plain = block_reduce<WrappingSum>(blockDim.x, [&](int64_t) { return mine.plain; });
  const unsigned long long weighted = block_reduce<WrappingSum>(blockDim.x, [&](int64_t) { return mine.weighted; });
  if (threadIdx.x == 0) {
    atomicAdd(&totals[0], plain);
    atomicAdd(&totals[1], weighted);
  }
}

uint64_t fingerprint_cuda(const Tensor& strided) {
  const Tensor x = strided.contiguous();  // the kernel reads element i at offset i
  Tensor totals = zeros({2}, TensorOptions(kInt64).with_device(x.device()));
  dispatch(x.dtype(), [&]<class T>() {
    const int64_t n = x.numel();
    launch_per_output(x.device(), (n + kBlockSize - 1) / kBlockSize, &fingerprint_kernel<T>, x.data<T>(), n,
                      reinterpret_cast<unsigned long long*>(totals.data<int64_t>()));
  });
  const Tensor host = totals.cpu();  // waits for the kernel
  const int64_t* sums = host.data<int64_t>();
  return fingerprint::finish({static_cast<uint64_t>(sums[0]), static_cast<uint64_t>(sums[1])});
}

const bool registered = kernels::add_kernel(kernels::fingerprint, DeviceType::CUDA, &fingerprint_cuda);

}  // namespace
}  // namespace ember::cuda
