// Random numbers on the CPU: element i of a draw is a pure function of (seed, offset, i)
// (Note [Philox4x32-10]), so the loop parallelises without changing a single value.
#include "core/cpu/loops.h"
#include "core/kernels.h"
#include "core/philox.h"

namespace ember::cpu {
namespace {

void random_cpu(kernels::RandomKind kind, const Tensor& out, uint64_t seed, uint64_t offset, double a, double b) {
  dispatch_floating(out.dtype(), "random", [&]<class T>() {
    T* o = out.data<T>();
    const int64_t n = out.numel();
    if (kind == kernels::RandomKind::Uniform) {
      parallel_for(n, n * 8, [&](int64_t i) {
        o[i] = static_cast<T>(a + (b - a) * philox::uniform(seed, offset, static_cast<uint64_t>(i)));
      });
    } else {
      parallel_for(n, n * 8, [&](int64_t i) {
        o[i] = static_cast<T>(a + b * philox::normal(seed, offset, static_cast<uint64_t>(i)));
      });
    }
  });
}

const bool registered = kernels::add_kernel(kernels::random, DeviceType::CPU, &random_cpu);

}  // namespace
}  // namespace ember::cpu
