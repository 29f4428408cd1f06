#pragma once
// Block-wide reductions for kernels that give one block to each output: the fold operations and
// block_reduce, plus the launcher.
//
// Note [One block per output]
// Each output, one (outer, inner) pair or one row, is reduced by one block: thread t folds
// elements t, t + blockDim, ... into its own accumulator, then the block combines the
// accumulators in shared memory along a fixed tree. The order depends only on the block size, so
// a result is the same on every run. Sums of floats accumulate in double, as on the CPU; the
// order differs from the CPU's, so the two agree to rounding, not bitwise. Blocks stride over the
// outputs, so any count works with one launch. A block per output idles most of its threads when
// k is small (the bias gradient of a Linear sums 128 values per output), which is simple rather
// than fast.
//
#include <algorithm>

#include "core/kernel_bodies/reduction_rules.h"
#include "cuda/loops.cuh"

namespace ember::cuda {

// The shared rules of core/kernel_bodies/reduction_rules.h, in block_reduce's form.
template <class T>
struct SumOp {
  using Acc = math::SumTotal<T>;
  __device__ static Acc identity() { return Acc(0); }
  __device__ static Acc step(Acc acc, Acc v) { return math::sum_add(acc, v); }
};

template <class T, bool IsMax>
struct ExtremumOp {
  using Acc = T;
  __device__ static T identity() { return math::kExtremumIdentity<IsMax, T>; }
  __device__ static T step(T acc, T v) { return math::extremum_step<IsMax>(acc, v); }
};

// The block's fold of load(0) ... load(k - 1) (see the Note); every thread gets the result.
template <class Op, class Load>
__device__ typename Op::Acc block_reduce(int64_t k, Load load) {
  using Acc = typename Op::Acc;
  __shared__ Acc partial[kBlockSize];
  Acc acc = Op::identity();
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) acc = Op::step(acc, load(j));
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] = Op::step(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  const Acc result = partial[0];
  __syncthreads();  // the next block_reduce of this thread block may reuse `partial`
  return result;
}

// Launches kernel<<<min(count, kMaxBlocks), kBlockSize>>> on `device`'s stream, one block per output.
template <class... Params, class... Args>
void launch_per_output(Device device, int64_t count, void (*kernel)(Params...), Args... args) {
  if (count <= 0) return;
  DeviceGuard guard(device.index);
  const auto blocks = static_cast<unsigned>(std::min(count, kMaxBlocks));
  kernel<<<blocks, kBlockSize, 0, stream(device.index)>>>(args...);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
