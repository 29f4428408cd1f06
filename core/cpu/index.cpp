// CPU kernels for index_select/gather, their adjoints index_add/scatter_add, and nll_loss's
// class_targets. Operands are contiguous, seen as [outer, k, inner] around the indexed dim;
// indices were range-checked by the op. The adjoints run serially over `outer` slices because
// two indices may name the same destination row.
#include <algorithm>

#include "core/cpu/parallel.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

void index_select_cpu(const Tensor& x, const Tensor& index, int64_t outer, int64_t k, int64_t inner,
                      const Tensor& out) {
  const int64_t m = index.numel();
  const int64_t* idx = index.data<int64_t>();
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(outer * m, outer * m * inner, [&](int64_t t) {
      const int64_t o = t / m, j = t % m;
      const T* src = px + (o * k + idx[j]) * inner;
      T* dst = po + t * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i];
    });
  });
}

void index_add_cpu(const Tensor& src, const Tensor& index, int64_t outer, int64_t k, int64_t inner,
                   const Tensor& out) {
  const int64_t m = index.numel();
  const int64_t* idx = index.data<int64_t>();
  dispatch(src.dtype(), [&]<class T>() {
    const T* ps = src.data<T>();
    T* po = out.data<T>();
    parallel_for(outer, outer * m * inner, [&](int64_t o) {
      for (int64_t j = 0; j < m; ++j) {
        const T* s = ps + (o * m + j) * inner;
        T* d = po + (o * k + idx[j]) * inner;
        for (int64_t i = 0; i < inner; ++i) d[i] += s[i];
      }
    });
  });
}

void gather_cpu(const Tensor& x, const Tensor& index, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  const int64_t m = index.numel() / std::max<int64_t>(outer * inner, 1);
  const int64_t* idx = index.data<int64_t>();
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(outer * m, outer * m * inner, [&](int64_t t) {
      const int64_t o = t / m;
      for (int64_t i = 0; i < inner; ++i) po[t * inner + i] = px[(o * k + idx[t * inner + i]) * inner + i];
    });
  });
}

void scatter_add_cpu(const Tensor& src, const Tensor& index, int64_t outer, int64_t k, int64_t inner,
                     const Tensor& out) {
  const int64_t m = index.numel() / std::max<int64_t>(outer * inner, 1);
  const int64_t* idx = index.data<int64_t>();
  dispatch(src.dtype(), [&]<class T>() {
    const T* ps = src.data<T>();
    T* po = out.data<T>();
    parallel_for(outer, outer * m * inner, [&](int64_t o) {
      for (int64_t j = 0; j < m; ++j) {
        const int64_t t = o * m + j;
        for (int64_t i = 0; i < inner; ++i) po[(o * k + idx[t * inner + i]) * inner + i] += ps[t * inner + i];
      }
    });
  });
}

// nll_loss's targets made safe to gather with: an ignored one becomes class 0 (the op checked the others).
void class_targets_cpu(const Tensor& target, int64_t /*classes*/, int64_t ignore_index, const Tensor& safe) {
  const int64_t* t = target.data<int64_t>();
  int64_t* out = safe.data<int64_t>();
  for (int64_t i = 0; i < target.numel(); ++i) out[i] = t[i] == ignore_index ? 0 : t[i];
}

const bool registered = kernels::add_kernel(kernels::index_select, DeviceType::CPU, &index_select_cpu) &&
                        kernels::add_kernel(kernels::index_add, DeviceType::CPU, &index_add_cpu) &&
                        kernels::add_kernel(kernels::gather, DeviceType::CPU, &gather_cpu) &&
                        kernels::add_kernel(kernels::scatter_add, DeviceType::CPU, &scatter_add_cpu) &&
                        kernels::add_kernel(kernels::class_targets, DeviceType::CPU, &class_targets_cpu);

}  // namespace
}  // namespace ember::cpu
