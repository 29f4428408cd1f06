// CPU kernels of the embedding lookup and its adjoint over a table [num, dim] and n ids.
#include <algorithm>
#include <limits>

#include "core/cpu/parallel.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// out[j] = weight[ids[j]], one task per id. The op checked host ids; a bad one still never reads
// outside the table (it gives a NaN row, as on the GPU).
void embedding_forward_cpu(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  dispatch_floating(weight.dtype(), "embedding", [&]<class T>() {
    const int64_t num = weight.size(0), dim = weight.size(1), n = ids.numel();
    const int64_t* id = ids.data<int64_t>();
    const T* pw = weight.data<T>();
    T* po = out.data<T>();
    parallel_for(n, n * dim, [&](int64_t j) {
      T* o = po + j * dim;
      if (id[j] < 0 || id[j] >= num) {
        std::fill(o, o + dim, std::numeric_limits<T>::quiet_NaN());
        return;
      }
      std::copy(pw + id[j] * dim, pw + (id[j] + 1) * dim, o);
    });
  });
}

// Note [Embedding backward]
// Row r of grad_weight is the sum of the gradient rows j whose id is r. Adding row by row over
// the ids touches each gradient element once: O(n * dim), where comparing every table row with
// every id would be O(num * n * dim). Two ids may name the same row, so the ids cannot be split
// between threads without a race; the columns can: each task owns a block of columns of every
// table row and walks all ids in order. Every element then receives its additions in id order,
// whatever the thread count, and the CUDA kernel adds in that same order (cuda/embedding.cu), so
// the result is bitwise reproducible and equal across devices.
void embedding_backward_cpu(const Tensor& grad, const Tensor& ids, const Tensor& grad_weight) {
  dispatch_floating(grad.dtype(), "embedding", [&]<class T>() {
    const int64_t num = grad_weight.size(0), dim = grad_weight.size(1), n = ids.numel();
    const int64_t* id = ids.data<int64_t>();
    const T* pg = grad.data<T>();
    T* pgw = grad_weight.data<T>();
    std::fill(pgw, pgw + num * dim, T(0));
    constexpr int64_t kColumns = 16;  // a cache line of floats per table row and task
    const int64_t blocks = (dim + kColumns - 1) / kColumns;
    parallel_for(blocks, n * dim, [&](int64_t blk) {
      const int64_t begin = blk * kColumns, end = std::min(begin + kColumns, dim);
      for (int64_t j = 0; j < n; ++j) {
        if (id[j] < 0 || id[j] >= num) continue;  // its forward row was NaN already
        const T* g = pg + j * dim;
        T* row = pgw + id[j] * dim;
        for (int64_t c = begin; c < end; ++c) row[c] += g[c];
      }
    });
  });
}

const bool registered = kernels::add_kernel(kernels::embedding_forward, DeviceType::CPU, &embedding_forward_cpu) &&
                        kernels::add_kernel(kernels::embedding_backward, DeviceType::CPU, &embedding_backward_cpu);

}  // namespace
}  // namespace ember::cpu
