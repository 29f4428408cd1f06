// CUDA kernels of the embedding lookup and its adjoint, with the results of
// core/cpu/embedding.cpp bit for bit.
//
// Note [Embedding ids on the device]
// The op checks ids that are on the host. Ids already on the GPU are not copied back to be
// checked (that would wait for the device on every lookup); instead both kernels test each id
// where they read it: an id outside [0, num) gives a NaN output row, which no later op can
// mistake for data (the loss turns NaN), and contributes nothing to the table's gradient. No
// kernel reads or writes outside the table. The lookup also records the id, which the next
// synchronisation raises as the CPU's error (Note [Index errors found on the device]).
//
// The backward (Note [Embedding backward]) must add the gradient rows of repeated ids in id
// order, without float atomics (whose order, and so whose rounding, changes from run to run).
// CUB's radix sort orders (id, position) pairs by id; it is stable, so the positions of one id
// stay in increasing order. Then one thread per (run of equal ids, column) adds its run's rows in
// that order: the CPU's additions, bitwise, in O(n log n + n * dim) work. The per-thread bodies
// are core/kernel_bodies/embedding.h, which tests/test_kernel_bodies.cpp runs on the CPU.
#include <cub/device/device_radix_sort.cuh>

#include <limits>

#include "core/kernel_bodies/embedding.h"
#include "core/kernels.h"
#include "cuda/bad_index.cuh"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using embedding_bodies::LookupBody;
using embedding_bodies::SumRunsBody;

// The lookup's body, plus the record of the first bad id (Note [Index errors found on the
// device]): the thread of a row's first column checks that row's id, so each id is tested once.
template <class T>
struct CheckedLookupBody {
  LookupBody<T> lookup;
  BadIndex* bad;
  __device__ void operator()(int64_t i) const {
    if (i % lookup.dim == 0) index_in_range(bad, IndexCheck::Embedding, lookup.ids[i / lookup.dim], lookup.num);
    lookup(i);
  }
};

void embedding_forward_cuda(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  dispatch_floating(weight.dtype(), "embedding", [&]<class T>() {
    for_each(weight.device(), out.numel(),
             CheckedLookupBody<T>{{weight.data<T>(), ids.data<int64_t>(), weight.size(0), weight.size(1),
                                   std::numeric_limits<T>::quiet_NaN(), out.data<T>()},
                                  bad_index_record(weight.device().index)});
  });
}

struct IotaBody {
  int64_t* out;
  __device__ void operator()(int64_t i) const { out[i] = i; }
};

Tensor scratch(int64_t count, DType dtype, Device device) { return empty({count}, TensorOptions(dtype).with_device(device)); }

void embedding_backward_cuda(const Tensor& grad, const Tensor& ids, const Tensor& grad_weight) {
  const Device device = grad.device();
  const int64_t n = ids.numel(), num = grad_weight.size(0), dim = grad_weight.size(1);
  DeviceGuard guard(device.index);
  CUDA_CHECK(cudaMemsetAsync(grad_weight.raw_data(), 0, static_cast<size_t>(grad_weight.numel()) *
                             element_size(grad_weight.dtype()), stream(device.index)));
  if (n == 0) return;
  EMBER_CHECK(n <= std::numeric_limits<int>::max(), "[embedding] the CUDA backward sorts at most 2^31 - 1 ids, got ",
              n);
  Tensor positions = scratch(n, kInt64, device), sorted_ids = scratch(n, kInt64, device),
         sorted_positions = scratch(n, kInt64, device);
  for_each(device, n, IotaBody{positions.data<int64_t>()});
  auto sort = [&](void* temp, size_t& temp_bytes) {
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids.data<int64_t>(), sorted_ids.data<int64_t>(),
                                               positions.data<int64_t>(), sorted_positions.data<int64_t>(),
                                               static_cast<int>(n), 0, 64, stream(device.index)));
  };
  size_t temp_bytes = 0;
  sort(nullptr, temp_bytes);  // asks for the size of CUB's scratch memory
  Tensor temp = scratch(static_cast<int64_t>(temp_bytes), kUInt8, device);
  sort(temp.raw_data(), temp_bytes);
  dispatch_floating(grad.dtype(), "embedding", [&]<class T>() {
    for_each(device, n * dim,
             SumRunsBody<T>{grad.data<T>(), sorted_ids.data<int64_t>(), sorted_positions.data<int64_t>(), n, num, dim,
                            grad_weight.data<T>()});
  });
}

const bool registered =
    kernels::add_kernel(kernels::embedding_forward, DeviceType::CUDA, &embedding_forward_cuda) &&
    kernels::add_kernel(kernels::embedding_backward, DeviceType::CUDA, &embedding_backward_cuda);

}  // namespace
}  // namespace ember::cuda
