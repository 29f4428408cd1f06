#pragma once
// Cumsum's row walk, shared by core/cpu/cumsum.cpp and cuda/cumsum.cu: the same additions in the
// same order on both devices, so their results are equal bitwise (Note [Cumsum one row per
// thread] in cuda/cumsum.cu).
//
// Note [Integer cumsum wraps]
// Floats add in double and round each running sum once to the output's type, as PyTorch's CPU
// kernel does, so a long float32 row does not drift. Integers add in uint64: unsigned addition
// wraps modulo 2^64 by definition, and converting back to the signed output type is modular
// too (C++20), so a sum past INT64_MAX gives the two's-complement result PyTorch's kernel gives
// in practice, without the undefined behaviour of a signed overflow.
#include <cstdint>
#include <type_traits>

#include "core/kernel_bodies/host_device.h"

namespace ember::cumsum_bodies {

// Row r of x seen as [outer, n, inner] (r = outer index * inner + inner index), summed along n
// from the front or, with `reverse`, from the back.
template <class T>
struct CumsumRow {
  const T* x;
  int64_t n, inner;
  bool reverse;
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t row) const {
    using Sum = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    const int64_t base = (row / inner) * n * inner + row % inner;
    Sum total = 0;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
      total += static_cast<Sum>(x[at]);
      out[at] = static_cast<T>(total);
    }
  }
};

}  // namespace ember::cumsum_bodies
