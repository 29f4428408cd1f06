// Tensor fingerprints on the CPU (Note [Tensor fingerprints]): one read of the data, cut into
// chunks whose sums are added up in any order (they are exact), so the thread count does not
// change a bit.
//
// Note [Fingerprints of permuted views]
// The fingerprint weighs each word by its position in the tensor's logical (row-major) order,
// not in memory. Checkpointing fingerprints what ops save, and matmul saves a Linear's weight as
// the transposed view weight.t(): copying that to row-major first costs a cache-hostile
// transpose (13x the time of the fingerprint itself for 1024 x 1024). A view whose elements fill
// a contiguous block in some other dim order (a transpose, a permute) is read in memory order
// instead, each element weighed by the logical position it has: along the dim that is innermost
// in memory, that position grows by a fixed step, so the loop stays a vectorisable
// multiply-add. Other layouts (gaps, broadcast dims) are copied to row-major first.
#include <omp.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "core/cpu/loops.h"
#include "core/fingerprint.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// The sums over elements [begin, end) of row-major data. Written as a plain loop over 32-bit
// words so that it vectorises (a widening multiply per word); float and int32-sized elements are
// one word each.
template <class T>
fingerprint::Sums chunk_sums(const T* p, int64_t begin, int64_t end) {
  return simd_dispatch([&] {
    fingerprint::Sums s;
    for (int64_t i = begin; i < end; ++i) fingerprint::add_element(s, static_cast<uint64_t>(i), p[i]);
    return s;
  });
}

// A dense block read in memory order (Note [Fingerprints of permuted views]): dims from
// outermost to innermost in memory, each with its size and its row-major stride.
struct MemoryOrder {
  std::vector<int64_t> sizes, logical_strides;
};

// The memory order of x when its elements fill a contiguous block; empty when they do not.
std::optional<MemoryOrder> memory_order(const Tensor& x) {
  const Shape& shape = x.shape();
  const Shape& strides = x.strides();
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) dims.push_back(d);
  if (dims.empty()) return std::nullopt;
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  MemoryOrder order;
  int64_t expected = 1;
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    if (strides[*d] != expected) return std::nullopt;
    expected *= shape[*d];
  }
  Shape logical(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) logical[d - 1] = logical[d] * shape[d];
  for (size_t d : dims) {
    order.sizes.push_back(shape[d]);
    order.logical_strides.push_back(logical[d]);
  }
  return order;
}

// The sums over the memory rows [begin, end) of a dense block in `order` (a row: the innermost
// dim in memory), each element at its logical position.
template <class T>
fingerprint::Sums permuted_sums(const T* p, const MemoryOrder& order, int64_t begin, int64_t end) {
  const size_t inner = order.sizes.size() - 1;
  const int64_t length = order.sizes[inner], step = order.logical_strides[inner];
  return simd_dispatch([&] {
    fingerprint::Sums s;
    for (int64_t row = begin; row < end; ++row) {
      int64_t position = 0;  // the row's first element, from its index in the outer dims
      for (int64_t rest = row, d = static_cast<int64_t>(inner) - 1; d >= 0; --d) {
        position += rest % order.sizes[d] * order.logical_strides[d];
        rest /= order.sizes[d];
      }
      const T* data = p + row * length;
      for (int64_t j = 0; j < length; ++j)
        fingerprint::add_element(s, static_cast<uint64_t>(position + j * step), data[j]);
    }
    return s;
  });
}

// fn(begin, end) over [0, n) in one chunk per thread; the exact sums added in any order.
template <class Fn>
fingerprint::Sums parallel_sums(int64_t n, int64_t work, const Fn& fn) {
  fingerprint::Sums total;
#pragma omp parallel if (work > kParallelGrain)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const fingerprint::Sums mine = fn(n * t / threads, n * (t + 1) / threads);
#pragma omp critical
    fingerprint::add(total, mine);
  }
  return total;
}

uint64_t fingerprint_cpu(const Tensor& x) {
  const std::optional<MemoryOrder> order = x.is_contiguous() || x.numel() == 0 ? std::nullopt : memory_order(x);
  const Tensor dense = x.is_contiguous() || order ? x : x.contiguous();
  return dispatch(x.dtype(), [&]<class T>() {
    const T* p = dense.data<T>();
    const int64_t n = dense.numel();
    if (!order)
      return fingerprint::finish(parallel_sums(n, n, [&](int64_t b, int64_t e) { return chunk_sums(p, b, e); }));
    const int64_t rows = n / order->sizes.back();
    return fingerprint::finish(
        parallel_sums(rows, n, [&](int64_t b, int64_t e) { return permuted_sums(p, *order, b, e); }));
  });
}

const bool registered = kernels::add_kernel(kernels::fingerprint, DeviceType::CPU, &fingerprint_cpu);

}  // namespace
}  // namespace ember::cpu
