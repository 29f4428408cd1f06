#pragma once
// Note [Tensor fingerprints]
// fingerprint(t) condenses a tensor's values into 64 bits, so that activation checkpointing can
// check, at the cost of one read of each saved tensor, that a recompute reproduced the forward
// bit for bit (Note [Checking the recompute] in utils/checkpoint_value_check.cpp). The tensor is
// read as 32-bit words w_p (an 8-byte element is two words, low then high; a smaller one is one
// word, zero-extended), and two sums are taken modulo 2^64:
//     plain    = sum of w_p
//     weighted = sum of (p + 1) * w_p
// A flipped bit changes `plain`; two swapped words change `weighted` by (q - p)(w_p - w_q), which
// is never 0 modulo 2^64 for distinct words less than 2^32 positions apart (both factors are then
// below 2^32). Integer addition is exact and commutative, so any order of summation (one CPU
// loop, OpenMP partial sums, a tree of CUDA threads) gives the same bits, and the CPU and the GPU
// agree. add_word below is the definition, word by word, as the CUDA kernel and the tests use it;
// the CPU kernel gets the same sums from running sums, without a multiply per word (Note
// [Fingerprints by running sums] in core/cpu/fingerprint.cpp). finish() mixes `plain` through a
// 64-bit finaliser (the multiply-xorshift mixer known from SplitMix64) before combining it with
// `weighted`, so one 64-bit value carries both. It is a checksum for accidents, not a
// cryptographic hash.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/kernel_bodies/host_device.h"

namespace ember::fingerprint {

struct Sums {
  uint64_t plain = 0, weighted = 0;
};

EMBER_HOST_DEVICE void add(Sums& s, const Sums& other) {
  s.plain += other.plain;
  s.weighted += other.weighted;
}

// Word p of the tensor, read from element i (p = i * words_per_element + k).
EMBER_HOST_DEVICE void add_word(Sums& s, uint64_t position, uint32_t word) {
  s.plain += word;
  s.weighted += (position + 1) * word;
}

template <class T>
inline constexpr int kWordsPerElement = sizeof(T) > 4 ? 2 : 1;

// The unsigned integer type as wide as T, to read T's bits through.
template <class T>
using BitsOf = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint8_t>>;

// An element's 32-bit words, low first: its bits as they are, so -0.0 and 0.0, or two NaN
// payloads, differ.
template <class T>
struct Words {
  uint32_t w[kWordsPerElement<T>];
};

template <class T>
EMBER_HOST_DEVICE Words<T> words_of(T value) {
  static_assert(sizeof(T) == 8 || sizeof(T) == 4 || sizeof(T) == 1);
  BitsOf<T> bits;
  memcpy(&bits, &value, sizeof(T));  // same width: compiles to a register move
  if constexpr (kWordsPerElement<T> == 2) {
    return {{static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)}};
  } else {
    return {{bits}};
  }
}

// Element i's words into s.
template <class T>
EMBER_HOST_DEVICE void add_element(Sums& s, uint64_t i, T value) {
  const Words<T> words = words_of(value);
  for (int k = 0; k < kWordsPerElement<T>; ++k) add_word(s, kWordsPerElement<T> * i + k, words.w[k]);
}

EMBER_HOST_DEVICE uint64_t finish(const Sums& s) {
  uint64_t z = s.plain;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (z ^ (z >> 31)) ^ s.weighted;
}

}  // namespace ember::fingerprint
