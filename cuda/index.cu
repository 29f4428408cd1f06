// CUDA kernels for index_select/gather and their adjoints index_add/scatter_add, with the
// semantics of core/cpu/index.cpp. Operands are contiguous, seen as [outer, k, inner] around the
// indexed dim. The selections check each index where they read it (Note [Index errors found on
// the device]); the adjoints run on indices their forward checked, and skip any outside [0, k).
//
// Note [Index adjoints by gathering]
// Two indices may name the same destination, so the CPU adds into each destination in index
// order. Here each thread owns one destination element and walks the m indices in that same
// order, adding the sources that land on it: no atomics, and bitwise the CPU's sums. The price is
// m index reads per destination, fine for the index counts of embeddings and losses.
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

// out[o, r, i] += the src[o, j, i] whose index (index[j], or index[o, j, i]) is r, in j order.
template <class T, bool kPerElement>
struct AddBody {
  const T* src;
  const int64_t* index;
  int64_t k, m, inner;
  T* out;
  __device__ void operator()(int64_t t) const {
    const int64_t i = t % inner, r = t / inner % k, o = t / (inner * k);
    T sum = out[t];
    for (int64_t j = 0; j < m; ++j) {
      const int64_t at = (o * m + j) * inner + i;
      if (index[kPerElement ? at : j] == r) sum += src[at];
    }
    out[t] = sum;
  }
};

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
  dispatch(src.dtype(), [&]<class T>() {
    for_each(out.device(), outer * k * inner,
             AddBody<T, false>{src.data<T>(), index.data<int64_t>(), k, index.numel(), inner, out.data<T>()});
  });
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
  const int64_t m = index.numel() / std::max<int64_t>(outer * inner, 1);
  dispatch(src.dtype(), [&]<class T>() {
    for_each(out.device(), outer * k * inner,
             AddBody<T, true>{src.data<T>(), index.data<int64_t>(), k, m, inner, out.data<T>()});
  });
}

const bool registered = kernels::add_kernel(kernels::index_select, DeviceType::CUDA, &index_select_cuda) &&
                        kernels::add_kernel(kernels::index_add, DeviceType::CUDA, &index_add_cuda) &&
                        kernels::add_kernel(kernels::gather, DeviceType::CUDA, &gather_cuda) &&
                        kernels::add_kernel(kernels::scatter_add, DeviceType::CUDA, &scatter_add_cuda);

}  // namespace
}  // namespace ember::cuda
