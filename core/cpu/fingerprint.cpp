// Tensor fingerprints on the CPU (Note [Tensor fingerprints]): one read of the data, cut into
// chunks whose sums are added up in any order (they are exact), so the thread count does not
// change a bit.
#include <omp.h>

#include "core/cpu/loops.h"
#include "core/fingerprint.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// The sums over elements [begin, end). Written as a plain loop over 32-bit words so that it
// vectorises (a widening multiply per word); float and int32-sized elements are one word each.
template <class T>
fingerprint::Sums chunk_sums(const T* p, int64_t begin, int64_t end) {
  return simd_dispatch([&] {
    fingerprint::Sums s;
    for (int64_t i = begin; i < end; ++i) fingerprint::add_element(s, static_cast<uint64_t>(i), p[i]);
    return s;
  });
}

uint64_t fingerprint_cpu(const Tensor& x) {
  return dispatch(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    const int64_t n = x.numel();
    fingerprint::Sums total;
#pragma omp parallel if (n > kParallelGrain)
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const fingerprint::Sums mine = chunk_sums(p, n * t / threads, n * (t + 1) / threads);
#pragma omp critical
      fingerprint::add(total, mine);
    }
    return fingerprint::finish(total);
  });
}

const bool registered = kernels::add_kernel(kernels::fingerprint, DeviceType::CPU, &fingerprint_cpu);

}  // namespace
}  // namespace ember::cpu
