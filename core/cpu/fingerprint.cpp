// Tensor fingerprints on the CPU (Note [Tensor fingerprints]): one read of the data, with OpenMP
// partial sums that add up to the same 64 bits whatever the thread count.
#include "core/cpu/loops.h"
#include "core/fingerprint.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

uint64_t fingerprint_cpu(const Tensor& x) {
  return dispatch(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    const int64_t n = x.numel();
    uint64_t total = 0;
#pragma omp parallel for reduction(+ : total) if (n > kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n; ++i) total += fingerprint::term(static_cast<uint64_t>(i), fingerprint::bits_of(p[i]));
    return total;
  });
}

const bool registered = kernels::add_kernel(kernels::fingerprint, DeviceType::CPU, &fingerprint_cpu);

}  // namespace
}  // namespace ember::cpu
