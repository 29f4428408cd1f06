// CUDA kernel of sort, argsort and topk, with the positions core/cpu/sort.cpp gives (Note [Sort
// order]). x is contiguous, seen as [outer, n, inner]; each (outer, inner) row is sorted along n.
//
// Note [Sorting rows with two stable sorts]
// CUB's radix sort is stable, and sorts unsigned integer keys. Every element gets a key whose
// unsigned order is the Note's order of values: the float bits turned so that negatives come
// first (complemented) and positives after (sign bit set), -0.0 made 0.0 so the two tie, and
// every NaN the largest key; signed integers with their sign bit flipped; for a descending sort
// the complement of all that. Pass 1 sorts all elements of the tensor by that key; pass 2 sorts
// the result, stably, by row. Elements start in position order, so within a row equal keys
// stay in position order through both passes: the stable order the CPU's comparison gives.
// Then row r's sorted positions are entries r * n ... r * n + n - 1, of which the first k are
// written. Two sorts over every element, whatever the row length, and no comparison sort to
// write; pass 2 uses only the bits the row count needs.
#include <cub/device/device_radix_sort.cuh>

#include <cstring>
#include <type_traits>

#include "core/kernels.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

// The key of v: unsigned order = the Note's ascending order of values.
template <class T>
__device__ uint64_t order_key(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    constexpr Bits kSign = Bits{1} << (sizeof(T) * 8 - 1);
    if (isnan(v)) return ~uint64_t{0};
    if (v == T(0)) v = T(0);  // -0.0 ties with 0.0
    Bits bits;
    memcpy(&bits, &v, sizeof bits);
    return static_cast<uint64_t>((bits & kSign) != 0 ? ~bits : bits | kSign);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<uint64_t>(v) ^ (uint64_t{1} << 63);
  } else {
    return static_cast<uint64_t>(v);
  }
}

template <class T>
struct KeyBody {
  const T* x;
  bool descending;
  uint64_t* key;
  int64_t* position;
  __device__ void operator()(int64_t t) const {
    const uint64_t k = order_key(x[t]);
    key[t] = descending ? ~k : k;
    position[t] = t;
  }
};

// The row of each element, in the order pass 1 left them.
struct RowBody {
  const int64_t* position;
  int64_t n, inner;
  uint64_t* row;
  __device__ void operator()(int64_t p) const {
    const int64_t t = position[p];
    row[p] = static_cast<uint64_t>(t / (n * inner) * inner + t % inner);
  }
};

// indices[o, j, i] for j < k: the position along n of the j-th element of row (o, i).
struct WriteBody {
  const int64_t* position;  // sorted by row, then by key
  int64_t n, inner, k;
  int64_t* indices;
  __device__ void operator()(int64_t e) const {
    const int64_t row = e / k, j = e % k, o = row / inner, i = row % inner;
    indices[(o * k + j) * inner + i] = position[row * n + j] / inner % n;
  }
};

// Stable sort of (keys, values) pairs by the low `bits` bits of the keys, on the device's stream.
void sort_pairs(Device device, const uint64_t* keys_in, uint64_t* keys_out, const int64_t* values_in,
                int64_t* values_out, int64_t count, int bits) {
  DeviceGuard guard(device.index);
  auto sort = [&](void* temp, size_t& temp_bytes) {
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in, values_out, count, 0,
                                               bits, stream(device.index)));
  };
  size_t temp_bytes = 0;
  sort(nullptr, temp_bytes);  // asks for the size of CUB's scratch memory
  const Tensor temp = empty({static_cast<int64_t>(temp_bytes)}, TensorOptions(kUInt8).with_device(device));
  sort(temp.raw_data(), temp_bytes);
}

void sort_cuda(const Tensor& x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool descending,
               const Tensor& indices) {
  const Device device = x.device();
  const int64_t count = x.numel(), rows = outer * inner;
  if (count == 0 || k == 0) return;
  const auto scratch = [&](DType dtype) { return empty({count}, TensorOptions(dtype).with_device(device)); };
  const auto as_keys = [](const Tensor& t) { return reinterpret_cast<uint64_t*>(t.raw_data()); };
  Tensor key = scratch(kInt64), sorted_key = scratch(kInt64), position = scratch(kInt64), by_key = scratch(kInt64);
  dispatch(x.dtype(), [&]<class T>() {
    for_each(device, count, KeyBody<T>{x.data<T>(), descending, as_keys(key), position.data<int64_t>()});
  });
  const int key_bits = element_size(x.dtype()) == 1 ? 8 : element_size(x.dtype()) == 4 ? 32 : 64;
  sort_pairs(device, as_keys(key), as_keys(sorted_key), position.data<int64_t>(), by_key.data<int64_t>(), count,
             key_bits);
  for_each(device, count, RowBody{by_key.data<int64_t>(), n, inner, as_keys(key)});
  int row_bits = 1;
  while (row_bits < 64 && (static_cast<uint64_t>(rows - 1) >> row_bits) != 0) ++row_bits;
  sort_pairs(device, as_keys(key), as_keys(sorted_key), by_key.data<int64_t>(), position.data<int64_t>(), count,
             row_bits);
  for_each(device, rows * k, WriteBody{position.data<int64_t>(), n, inner, k, indices.data<int64_t>()});
}

const bool registered = kernels::add_kernel(kernels::sort, DeviceType::CUDA, &sort_cuda);

}  // namespace
}  // namespace ember::cuda
