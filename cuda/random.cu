// Random numbers on CUDA: the raw words come from cuRAND's Philox4_32_10 device API, which is
// ember's stream by definition (Note [ember's streams are cuRAND's] in core/kernel_bodies/philox.h); the words
// become numbers by ember's own rules (philox::to_unit, philox::box_muller), so a CUDA tensor
// drawn from a generator state holds the uniforms a CPU tensor drawn from that state holds.
//
// Note [One thread per Philox block]
// One Philox block is four 32-bit words, ten rounds of multiplications. Each thread computes one
// block with curand_init + curand4 and writes the four elements it gives (fewer at the end of
// the tensor), as the CPU's loop does (Note [Philox blocks side by side]): a block per element
// would quadruple the integer work of a memory-bound kernel. (curand_init and curand4
// compute more blocks than the one returned — the block after it, for the next call — but the
// state is a local that nothing reads afterwards, so nvcc drops that work: the PTX of each
// random kernel holds the 20 multiply-highs of one ten-round block.)
//
// Note [Bit-identical random numbers]
// The CPU computes a + scale * x with a separate multiply and add. nvcc would fuse the two into
// one fma (rounded once instead of twice), which can change the last bit of a double and, now
// and then, of the float it is rounded to; __dmul_rn/__dadd_rn keep the two roundings. Normal
// draws: a float64 tensor takes Box-Muller in double (the GPU's log/sin/cos may differ from the
// CPU's libm by an ulp of a double); a float32 tensor takes it in float (logf, sqrtf, sincospif:
// a float32 transcendental is many times cheaper than a double one on the GPU), which agrees
// with the CPU's double-then-rounded values to a few float ulps.
#include <curand_kernel.h>

#include <type_traits>

#include "core/kernels.h"
#include "core/kernel_bodies/philox.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::RandomKind;

// The block at counter `counter` of stream `seed`, through cuRAND (its offsets count words).
__device__ uint4 philox_block(uint64_t seed, uint64_t counter) {
  curandStatePhilox4_32_10_t state;
  curand_init(seed, 0, 4 * counter, &state);
  return curand4(&state);
}

// Box-Muller in float on a pair of words, both branches at once (see Note [Bit-identical random
// numbers]). 1 - u is in (0, 1], so the log is finite; sincospif(2u) is sin/cos(2 pi u) without
// rounding 2 pi u first.
__device__ float2 box_muller_float(uint32_t radius_word, uint32_t angle_word) {
  const float u1 = 1.0f - static_cast<float>(radius_word >> 8) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>(angle_word >> 8) * (1.0f / 16777216.0f);
  const float r = sqrtf(-2.0f * logf(u1));
  float s, c;
  sincospif(2.0f * u2, &s, &c);
  return make_float2(r * c, r * s);
}

template <class T, RandomKind kKind>
struct RandomBody {
  T* out;  // contiguous, n elements
  int64_t n;
  uint64_t seed, offset;
  double a, scale;

  __device__ T affine(double x) const { return static_cast<T>(__dadd_rn(a, __dmul_rn(scale, x))); }

  // Thread t writes elements 4t .. 4t + 3 from the block at counter offset + t.
  __device__ void operator()(int64_t t) const {
    const uint4 block = philox_block(seed, offset + static_cast<uint64_t>(t));
    const uint32_t words[4] = {block.x, block.y, block.z, block.w};
    T values[4];
    if constexpr (kKind == RandomKind::Uniform) {
      for (int lane = 0; lane < 4; ++lane) values[lane] = affine(philox::to_unit(words[lane]));
    } else if constexpr (std::is_same_v<T, float>) {
      for (int pair = 0; pair < 4; pair += 2) {
        const float2 z = box_muller_float(words[pair], words[pair + 1]);
        values[pair] = affine(z.x);
        values[pair + 1] = affine(z.y);
      }
    } else {
      for (int lane = 0; lane < 4; ++lane)
        values[lane] = affine(philox::box_muller(words[lane & 2], words[(lane & 2) + 1], (lane & 1) != 0));
    }
    const int64_t first = 4 * t;
    for (int lane = 0; lane < 4 && first + lane < n; ++lane) out[first + lane] = values[lane];
  }
};

// Uniform in [a, b): a + (b - a) * u. Normal with mean a and std b: a + b * z.
void random_cuda(RandomKind kind, const Tensor& out, uint64_t seed, uint64_t offset, double a, double b) {
  const int64_t n = out.numel(), blocks = (n + 3) / 4;
  // cuRAND's offset counts words in 64 bits, so counters must stay below 2^62 (2^64 numbers
  // drawn from one seed; Generator::reserve would have to be called for that many first).
  EMBER_CHECK(offset < (uint64_t{1} << 62) - static_cast<uint64_t>(blocks), "[random] generator offset ", offset,
              " is past cuRAND's 2^62 counters");
  dispatch_floating(out.dtype(), "random", [&]<class T>() {
    if (kind == RandomKind::Uniform) {
      for_each(out.device(), blocks, RandomBody<T, RandomKind::Uniform>{out.data<T>(), n, seed, offset, a, b - a});
    } else {
      for_each(out.device(), blocks, RandomBody<T, RandomKind::Normal>{out.data<T>(), n, seed, offset, a, b});
    }
  });
}

const bool registered = kernels::add_kernel(kernels::random, DeviceType::CUDA, &random_cuda);

}  // namespace
}  // namespace ember::cuda
