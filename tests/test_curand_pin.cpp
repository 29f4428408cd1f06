// ember's random streams are cuRAND's PHILOX4_32_10 streams (Note [ember's streams are cuRAND's]
// in core/kernel_bodies/philox.h), checked on the CPU against libcurand: its host generator, which runs
// without a GPU, and the device API's state functions compiled for the host, which are the code
// cuda/random.cu runs on the GPU. Built wherever the CUDA toolkit is, with or without the CUDA
// backend.
#include <curand.h>
#include <curand_kernel.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/generator.h"
#include "core/kernel_bodies/philox.h"
#include "core/tensor.h"

using namespace ember;

namespace {

// Seeds with both 32-bit halves in use (cuRAND's key is the seed's low word, then its high word).
const uint64_t kSeeds[] = {0, 1, 67280421310721ull, 0xFFFFFFFF00000001ull, 0xDEADBEEFCAFEF00Dull};
// Counters around the carry from the low to the high 32-bit counter word, and far out.
const uint64_t kCounters[] = {0, 1, 2, 3, 1000, 0xFFFFFFFFull, 0x100000000ull, (1ull << 40) + 7, (1ull << 46) - 1};
// The host generator's default ordering interleaves this many subsequences, block by block.
constexpr uint64_t kInterleaved = 65536;

class HostGenerator {
 public:
  explicit HostGenerator(uint64_t seed) {
    EXPECT_EQ(curandCreateGeneratorHost(&g_, CURAND_RNG_PSEUDO_PHILOX4_32_10), CURAND_STATUS_SUCCESS);
    EXPECT_EQ(curandSetPseudoRandomGeneratorSeed(g_, seed), CURAND_STATUS_SUCCESS);
  }
  ~HostGenerator() { curandDestroyGenerator(g_); }
  HostGenerator(const HostGenerator&) = delete;
  HostGenerator& operator=(const HostGenerator&) = delete;

  // n words of the generator's output from word `offset` on.
  std::vector<uint32_t> words(uint64_t offset, size_t n) {
    std::vector<uint32_t> out(n);
    EXPECT_EQ(curandSetGeneratorOffset(g_, offset), CURAND_STATUS_SUCCESS);
    EXPECT_EQ(curandGenerate(g_, out.data(), n), CURAND_STATUS_SUCCESS);
    return out;
  }

 private:
  curandGenerator_t g_ = nullptr;
};

void expect_block(const std::vector<uint32_t>& got, size_t at, const philox::Block& want) {
  for (size_t lane = 0; lane < 4; ++lane) EXPECT_EQ(got[at + lane], want.v[lane]) << "lane " << lane;
}

}  // namespace

TEST(CurandPin, HostGeneratorInterleavesEmbersBlocks) {
  // One run of output: ember's counters 0..7 are every 65536th block of it.
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    HostGenerator g(seed);
    const std::vector<uint32_t> out = g.words(0, 4 * kInterleaved * 8);
    for (uint64_t c = 0; c < 8; ++c) expect_block(out, 4 * kInterleaved * c, philox::generate(seed, c));
  }
}

TEST(CurandPin, HostGeneratorOffsetReachesEmbersCounters) {
  for (uint64_t seed : kSeeds) {
    HostGenerator g(seed);
    for (uint64_t c : kCounters) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " counter " << c);
      expect_block(g.words(4 * kInterleaved * c, 4), 0, philox::generate(seed, c));
    }
  }
}

TEST(CurandPin, DeviceApiGivesEmbersBlocks) {
  for (uint64_t seed : kSeeds) {
    for (uint64_t c : kCounters) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " counter " << c);
      // cuda/random.cu's call: the state at word offset 4c, one block.
      curandStatePhilox4_32_10_t state;
      curand_init(seed, 0, 4 * c, &state);
      for (uint64_t next = c; next < c + 3; ++next) {  // and the blocks after it, in order
        const uint4 b = curand4(&state);
        const philox::Block want = philox::generate(seed, next);
        EXPECT_EQ(b.x, want.v[0]);
        EXPECT_EQ(b.y, want.v[1]);
        EXPECT_EQ(b.z, want.v[2]);
        EXPECT_EQ(b.w, want.v[3]);
      }
      // cuRAND's offsets count words: offset 4c + lane starts at that word of the block.
      for (uint32_t lane = 0; lane < 4; ++lane) {
        curand_init(seed, 0, 4 * c + lane, &state);
        EXPECT_EQ(curand(&state), philox::generate(seed, c).v[lane]) << "lane " << lane;
      }
    }
  }
}

TEST(CurandPin, RandDrawsCurandsWords) {
  // The public API end to end: rand() after manual_seed is to_unit of cuRAND's words, counter
  // after counter, and a second draw continues at the next unused counter.
  const uint64_t seed = 20240611;
  manual_seed(seed);
  const std::vector<double> first = rand({10}, kFloat64).to_vector<double>();  // counters 0, 1, 2
  const std::vector<double> second = rand({4}, kFloat64).to_vector<double>();  // counter 3
  curandStatePhilox4_32_10_t state;
  curand_init(seed, 0, 0, &state);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], philox::to_unit(curand(&state))) << "element " << i;
  curand_init(seed, 0, 4 * 3, &state);
  for (size_t i = 0; i < second.size(); ++i) EXPECT_EQ(second[i], philox::to_unit(curand(&state))) << "element " << i;
}
