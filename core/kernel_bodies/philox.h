#pragma once
// Note [Philox4x32-10]
// A counter-based random number generator (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11): the i-th 128 bits of a stream are a pure function of (key = seed, counter =
// offset + i), ten rounds of multiply-and-xor. No state is carried between numbers, so every
// thread of a kernel computes its own numbers independently, and a stream can be replayed from
// any (seed, offset) — which is what activation checkpointing needs to redraw Dropout masks.
// This header is plain C++ so the CPU and CUDA kernels share it and produce identical numbers.
//
// Note [ember's streams are cuRAND's]
// ember's stream (seed, offset) is, by definition, cuRAND's PHILOX4_32_10 stream of that seed:
// element i of a draw is 32-bit word i % 4 of the block at 128-bit counter offset + i / 4
// (low 64 bits; the high 64 bits, cuRAND's "subsequence", are 0) under the 64-bit key seed
// (low word first). In cuRAND's terms:
//   - device API: curand_init(seed, /*subsequence=*/0, /*offset=*/4 * (offset + i / 4), &state),
//     then curand4(&state) returns the block; cuRAND's offset counts 32-bit words.
//   - host generator (curandCreateGeneratorHost, CURAND_RNG_PSEUDO_PHILOX4_32_10, seeded with
//     `seed`, default ordering): its output interleaves 65536 subsequences block by block, so
//     ember's block at counter c is its output words 4 * 65536 * c .. + 3 (its offset, too,
//     counts words of that interleaved output).
// tests/test_curand_pin.cpp checks both on the CPU against libcurand, and cuda/random.cu draws
// its words through the device API. Only the conversion of words to numbers is ember's own
// (to_unit, box_muller below), so a CPU and a CUDA tensor drawn from the same state hold the
// same uniforms bit for bit.
#include <cmath>
#include <cstdint>

#include "core/kernel_bodies/host_device.h"

namespace ember::philox {

struct Block {
  uint32_t v[4];
};

EMBER_HOST_DEVICE uint32_t mulhi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

// One of the ten rounds on a block's four words under round key (k0, k1).
EMBER_HOST_DEVICE void round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  const uint32_t hi0 = mulhi(kM0, c0), lo0 = kM0 * c0;
  const uint32_t hi1 = mulhi(kM1, c2), lo1 = kM1 * c2;
  c0 = hi1 ^ c1 ^ k0;
  c1 = lo1;
  c2 = hi0 ^ c3 ^ k1;
  c3 = lo0;
}
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (Weyl) increments

// The four 32-bit words at counter position `counter` of the stream keyed by `seed`.
EMBER_HOST_DEVICE Block generate(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r, k0 += kW0, k1 += kW1) round(c0, c1, c2, c3, k0, k1);
  return Block{{c0, c1, c2, c3}};
}

// Note [Philox blocks side by side]
// A CPU loop that fills a tensor needs many consecutive blocks. generate_group computes N of them
// (counters counter .. counter + N - 1) with each round applied to all N before the next: the
// arithmetic of generate(), so the same words (word w of block l in words[w][l]), in loops over
// N independent lanes that a compiler turns into vector instructions (N = 8: one AVX2 register
// per word).
template <int N>
EMBER_HOST_DEVICE void generate_group(uint64_t seed, uint64_t counter, uint32_t (&words)[4][N]) {
  uint32_t(&c0)[N] = words[0], (&c1)[N] = words[1], (&c2)[N] = words[2], (&c3)[N] = words[3];
  for (int l = 0; l < N; ++l) {
    const uint64_t at = counter + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(at);
    c1[l] = static_cast<uint32_t>(at >> 32);
    c2[l] = c3[l] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r, k0 += kW0, k1 += kW1)
    for (int l = 0; l < N; ++l) round(c0[l], c1[l], c2[l], c3[l], k0, k1);
}

// 24 random bits -> a float in [0, 1) with every value exactly representable.
EMBER_HOST_DEVICE double to_unit(uint32_t x) { return static_cast<double>(x >> 8) * (1.0 / 16777216.0); }

// Element i of a draw of uniforms starting at `offset` (four elements per counter).
EMBER_HOST_DEVICE double uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  return to_unit(generate(seed, offset + i / 4).v[i % 4]);
}

// Box-Muller on two words: the radius from `radius_word`, the angle from `angle_word`; the cosine
// branch for even lanes, the sine branch for odd ones. 1 - to_unit is in (0, 1]: log is finite.
EMBER_HOST_DEVICE double box_muller(uint32_t radius_word, uint32_t angle_word, bool sine) {
  double r = ::sqrt(-2.0 * ::log(1.0 - to_unit(radius_word)));
  double angle = 6.283185307179586 * to_unit(angle_word);
  return sine ? r * ::sin(angle) : r * ::cos(angle);
}

// Element i of a draw of standard normals: Box-Muller on the pair of words of i's half block.
EMBER_HOST_DEVICE double normal(uint64_t seed, uint64_t offset, uint64_t i) {
  Block b = generate(seed, offset + i / 4);
  uint32_t lane = static_cast<uint32_t>(i % 4), pair = lane & 2u;
  return box_muller(b.v[pair], b.v[pair + 1], (lane & 1u) != 0);
}

}  // namespace ember::philox
