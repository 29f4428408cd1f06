// Tensor fingerprints on CUDA (Note [Tensor fingerprints]): a grid-stride loop sums each
// thread's terms, each block folds its threads' sums, and the blocks add theirs into one 64-bit
// word with atomicAdd. Integer addition is exact and commutative, so this order of summation
// gives the very bits the CPU's loop gives.
#include "core/fingerprint.h"
#include "core/kernels.h"
#include "cuda/block_reduce.cuh"

namespace ember::cuda {
namespace {

struct WrappingSum {
  using Acc = unsigned long long;  // atomicAdd's 64-bit type
  __device__ static Acc identity() { return 0; }
  __device__ static Acc step(Acc acc, Acc v) { return acc + v; }
};

template <class T>
__global__ void fingerprint_kernel(const T* x, int64_t n, unsigned long long* total) {
  unsigned long long mine = 0;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    mine += fingerprint::term(static_cast<uint64_t>(i), fingerprint::bits_of(x[i]));
  // Thread j's load is its own sum: one value per thread, folded across the block.
  const unsigned long long block_sum = block_reduce<WrappingSum>(blockDim.x, [&](int64_t) { return mine; });
  if (threadIdx.x == 0) atomicAdd(total, block_sum);
}

uint64_t fingerprint_cuda(const Tensor& x) {
  Tensor total = zeros({1}, TensorOptions(kInt64).with_device(x.device()));
  dispatch(x.dtype(), [&]<class T>() {
    const int64_t n = x.numel();
    launch_per_output(x.device(), (n + kBlockSize - 1) / kBlockSize, &fingerprint_kernel<T>, x.data<T>(), n,
                      reinterpret_cast<unsigned long long*>(total.data<int64_t>()));
  });
  return static_cast<uint64_t>(total.cpu().data<int64_t>()[0]);  // waits for the kernel
}

const bool registered = kernels::add_kernel(kernels::fingerprint, DeviceType::CUDA, &fingerprint_cuda);

}  // namespace
}  // namespace ember::cuda
