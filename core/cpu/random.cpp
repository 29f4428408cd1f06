// Random numbers on the CPU: element i of a draw is word i % 4 of Philox block offset + i / 4
// (Note [Philox4x32-10]), a pure function of (seed, offset, i), so the loop parallelises without
// changing a single value. Each task computes eight consecutive blocks side by side (Note
// [Philox blocks side by side]), each block once for its four elements.
#include <algorithm>

#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/kernel_bodies/philox.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

constexpr int kBlocks = 8;                        // blocks per group
constexpr int64_t kGroupElements = 4 * kBlocks;  // the elements one group gives

void random_cpu(kernels::RandomKind kind, const Tensor& out, uint64_t seed, uint64_t offset, double a, double b) {
  dispatch_floating(out.dtype(), "random", [&]<class T>() {
    T* o = out.data<T>();
    const int64_t n = out.numel(), groups = (n + kGroupElements - 1) / kGroupElements;
    const double scale = kind == kernels::RandomKind::Uniform ? b - a : b;
    parallel_for(groups, n * 8, [&](int64_t g) {
      uint32_t words[4][kBlocks];
      T values[kGroupElements];
      simd_dispatch([&] {
        philox::generate_group<kBlocks>(seed, offset + static_cast<uint64_t>(g * kBlocks), words);
        // element e: word e % 4 of block e / 4
        if (kind == kernels::RandomKind::Uniform) {
          for (int e = 0; e < kGroupElements; ++e) values[e] = static_cast<T>(a + scale * philox::to_unit(words[e % 4][e / 4]));
        } else {
          for (int e = 0; e < kGroupElements; ++e) {
            const int block = e / 4, pair = (e % 4) & 2;
            values[e] = static_cast<T>(
                a + scale * philox::box_muller(words[pair][block], words[pair + 1][block], (e & 1) != 0));
          }
        }
      });
      const int64_t first = g * kGroupElements;
      std::copy(values, values + std::min(kGroupElements, n - first), o + first);
    });
  });
}

const bool registered = kernels::add_kernel(kernels::random, DeviceType::CPU, &random_cpu);

}  // namespace
}  // namespace ember::cpu
