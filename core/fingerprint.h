#pragma once
// Note [Tensor fingerprints]
// fingerprint(t) condenses a tensor's values into 64 bits, so that activation checkpointing can
// check — at the cost of one read of each saved tensor — that a recompute reproduced the forward
// bit for bit (Note [Checking the recompute] in utils/checkpoint.cpp). Element i contributes
// term(i, bits of element i), and the terms are added modulo 2^64. Integer addition is exact and
// commutative, so any order of summation — one CPU loop, OpenMP partial sums, a tree of CUDA
// threads — gives the same 64 bits, and the CPU and the GPU agree. The position goes into the
// term so that two swapped elements change the sum; the term is a 64-bit finalising hash (the
// multiply-xorshift mixer known from SplitMix64), which spreads every input bit over the word, so
// a change of one bit anywhere changes about half the bits of the fingerprint. It is a checksum,
// not a cryptographic hash: it catches accidents, not adversaries.
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace ember::fingerprint {

EMBER_HOST_DEVICE uint64_t term(uint64_t position, uint64_t bits) {
  uint64_t z = bits + position * 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio: positions far apart
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The element's bit pattern, zero-extended (so -0.0 and 0.0, or two NaNs, differ as their bits do).
template <class T>
EMBER_HOST_DEVICE uint64_t bits_of(T value) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t bits = 0;
  memcpy(&bits, &value, sizeof(T));
  return bits;
}

}  // namespace ember::fingerprint
