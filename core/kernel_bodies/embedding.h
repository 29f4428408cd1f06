#pragma once
// The per-thread bodies of the CUDA embedding kernels (cuda/embedding.cu), host-device code so
// that tests/test_kernel_bodies.cpp runs them on the CPU against naive loops (Note [Embedding
// ids on the device] in cuda/embedding.cu).
#include <cstdint>

#include "core/kernel_bodies/host_device.h"

namespace ember::embedding_bodies {

// Thread i is element i of out [n, dim]: weight[ids[i / dim], i % dim], or `nan` for an id
// outside [0, num).
template <class T>
struct LookupBody {
  const T* weight;
  const int64_t* ids;
  int64_t num, dim;
  T nan;
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t id = ids[i / dim];
    out[i] = id >= 0 && id < num ? weight[id * dim + i % dim] : nan;
  }
};

// Thread i = (p, c) over [n, dim]: with the ids stably sorted (positions[q] is where sorted id q
// came from), the thread at the first position p of a run of equal ids writes column c of that
// id's gradient row, the sum of the run's gradient rows in position order; the others do nothing.
template <class T>
struct SumRunsBody {
  const T* grad;
  const int64_t *sorted_ids, *positions;
  int64_t n, num, dim;
  T* grad_weight;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t p = i / dim, c = i % dim, id = sorted_ids[p];
    if ((p > 0 && sorted_ids[p - 1] == id) || id < 0 || id >= num) return;
    T sum = T(0);
    for (int64_t q = p; q < n && sorted_ids[q] == id; ++q) sum += grad[positions[q] * dim + c];
    grad_weight[id * dim + c] = sum;
  }
};

}  // namespace ember::embedding_bodies
