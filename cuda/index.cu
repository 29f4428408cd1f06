// CUDA kernels for index_select/gather, their adjoints index_add/scatter_add, and nll_loss's
// class_targets, with the semantics of core/cpu/index.cpp. Operands are contiguous, seen as
// [outer, k, inner] around the indexed dim. The selections and class_targets check each index
// where they read it (Note [Index errors found on the device]); the adjoints run on indices
// their forward checked, and skip any outside [0, k).
//
// Note [Index adjoints by sorting]
// Two indices may name the same destination, so the CPU adds into each destination in index
// order, j = 0, 1, ... The GPU gets the same sums without float atomics (whose order, and so
// whose rounding, changes from run to run) and without every destination walking all m indices:
// 1. every source element t = (o, j, i) gets the flat destination it adds into,
//    (o * k + index) * inner + i, or past the end when the index is out of range;
// 2. CUB's radix sort orders the (destination, t) pairs by destination. It is stable, and the
//    elements of one destination all have the same (o, i), so they stay in increasing j order;
// 3. one thread per run of equal destinations adds the run's sources into the destination, in
//    that order.
// The result is deterministic and bitwise the CPU's, in O(n) work for n = outer * m * inner
// source elements (the radix sort makes a pass per 8 bits of the destination range), where the
// gathering loop it replaces read all m indices for each of the outer * k * inner destinations.
// The same as cuda/embedding.cu's backward, with the [outer, k, inner] layout.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "core/kernels.h"
#include "cuda/bad_index.cuh"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

// out[o, j, i] = x[o, index[j], i] (index_select) or x[o, index[o, j, i], i] (gather); 0 where
// the index is out of range, which is recorded in `bad`.
template <class T, bool kPerElement>
struct SelectBody {
  const T* x;
  const int64_t* index;
  int64_t k, m, inner;
  BadIndex* bad;
  T* out;
  __device__ void operator()(int64_t t) const {
    const int64_t i = t % inner, j = t / inner % m, o = t / (inner * m);
    const int64_t r = index[kPerElement ? t : j];
    constexpr IndexCheck kCheck = kPerElement ? IndexCheck::Gather : IndexCheck::IndexSelect;
    out[t] = index_in_range(bad, kCheck, r, k) ? x[(o * k + r) * inner + i] : T(0);
  }
};

// Step 1: the flat destination of source element t, or `none` (one past the last destination) for
// an index outside [0, k).
struct DestinationBody {
  const int64_t* index;
  int64_t k, m, inner;
  bool per_element;  // scatter_add: index[t]; index_add: index[j]
  uint64_t none;
  uint64_t* destination;
  int64_t* position;
  __device__ void operator()(int64_t t) const {
    const int64_t i = t % inner, j = t / inner % m, o = t / (inner * m);
    const int64_t r = index[per_element ? t : j];
    destination[t] = r >= 0 && r < k ? static_cast<uint64_t>((o * k + r) * inner + i) : none;
    position[t] = t;
  }
};

// Step 3: the thread of a run's first sorted element adds the run's sources, in sorted order.
template <class T>
struct AddRunsBody {
  const T* src;
  const uint64_t* destination;  // sorted
  const int64_t* position;      // the source element of each sorted entry
  int64_t n;
  uint64_t none;
  T* out;
  __device__ void operator()(int64_t p) const {
    const uint64_t d = destination[p];
    if (d == none || (p > 0 && destination[p - 1] == d)) return;
    T sum = out[d];
    for (int64_t q = p; q < n && destination[q] == d; ++q) sum += src[position[q]];
    out[d] = sum;
  }
};

// out[o, index, i] += src[o, j, i] over all (o, j, i), in j order per destination (the Note).
void add_by_sorting(const Tensor& src, const Tensor& index, bool per_element, int64_t outer, int64_t k,
                    int64_t inner, const Tensor& out) {
  const Device device = out.device();
  const int64_t n = src.numel(), m = n / std::max<int64_t>(outer * inner, 1);
  if (n == 0) return;
  const uint64_t none = static_cast<uint64_t>(outer * k * inner);
  const auto scratch = [&](int64_t count, DType dtype) {
    return empty({count}, TensorOptions(dtype).with_device(device));
  };
  Tensor destination = scratch(n, kInt64), position = scratch(n, kInt64);
  Tensor sorted_destination = scratch(n, kInt64), sorted_position = scratch(n, kInt64);
  auto* dest = reinterpret_cast<uint64_t*>(destination.raw_data());
  auto* sorted_dest = reinterpret_cast<uint64_t*>(sorted_destination.raw_data());
  for_each(device, n,
           DestinationBody{index.data<int64_t>(), k, m, inner, per_element, none, dest, position.data<int64_t>()});
  // Only the bits that `none`, the largest key, uses: one radix pass per 8 of them, not 8 passes.
  int end_bit = 1;
  while (end_bit < 64 && (none >> end_bit) != 0) ++end_bit;
  DeviceGuard guard(device.index);
  auto sort = [&](void* temp, size_t& temp_bytes) {
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, dest, sorted_dest, position.data<int64_t>(),
                                               sorted_position.data<int64_t>(), n, 0, end_bit,
                                               stream(device.index)));
  };
  size_t temp_bytes = 0;
  sort(nullptr, temp_bytes);  // asks for the size of CUB's scratch memory
  Tensor temp = scratch(static_cast<int64_t>(temp_bytes), kUInt8);
  sort(temp.raw_data(), temp_bytes);
  dispatch(src.dtype(), [&]<class T>() {
    for_each(device, n, AddRunsBody<T>{src.data<T>(), sorted_dest, sorted_position.data<int64_t>(), n, none,
                                       out.data<T>()});
  });
}

void index_select_cuda(const Tensor& x, const Tensor& index, int64_t /*outer*/, int64_t k, int64_t inner,
                       const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    for_each(out.device(), out.numel(),
             SelectBody<T, false>{x.data<T>(), index.data<int64_t>(), k, index.numel(), inner,
                                  bad_index_record(out.device().index), out.data<T>()});
  });
}

void index_add_cuda(const Tensor& src, const Tensor& index, int64_t outer, int64_t k, int64_t inner,
                    const Tensor& out) {
  add_by_sorting(src, index, false, outer, k, inner, out);
}

void gather_cuda(const Tensor& x, const Tensor& index, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  const int64_t m = index.numel() / std::max<int64_t>(outer * inner, 1);
  dispatch(x.dtype(), [&]<class T>() {
    for_each(out.device(), out.numel(),
             SelectBody<T, true>{x.data<T>(), index.data<int64_t>(), k, m, inner, bad_index_record(out.device().index),
                                 out.data<T>()});
  });
}

void scatter_add_cuda(const Tensor& src, const Tensor& index, int64_t outer, int64_t k, int64_t inner,
                      const Tensor& out) {
  add_by_sorting(src, index, true, outer, k, inner, out);
}

// nll_loss's targets made safe to gather with: an ignored one becomes class 0, and so does one
// outside [0, classes), which is recorded for the next synchronisation.
struct ClassTargetsBody {
  const int64_t* target;
  int64_t classes, ignore_index;
  BadIndex* bad;
  int64_t* safe;
  __device__ void operator()(int64_t i) const {
    const int64_t t = target[i];
    safe[i] = t == ignore_index || !index_in_range(bad, IndexCheck::NllLossTarget, t, classes) ? 0 : t;
  }
};

void class_targets_cuda(const Tensor& target, int64_t classes, int64_t ignore_index, const Tensor& safe) {
  for_each(safe.device(), safe.numel(),
           ClassTargetsBody{target.data<int64_t>(), classes, ignore_index, bad_index_record(safe.device().index),
                            safe.data<int64_t>()});
}

const bool registered = kernels::add_kernel(kernels::index_select, DeviceType::CUDA, &index_select_cuda) &&
                        kernels::add_kernel(kernels::index_add, DeviceType::CUDA, &index_add_cuda) &&
                        kernels::add_kernel(kernels::gather, DeviceType::CUDA, &gather_cuda) &&
                        kernels::add_kernel(kernels::scatter_add, DeviceType::CUDA, &scatter_add_cuda) &&
                        kernels::add_kernel(kernels::class_targets, DeviceType::CUDA, &class_targets_cuda);

}  // namespace
}  // namespace ember::cuda
