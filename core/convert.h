#pragma once
// Note [Float to integer conversion]
// Converting a float that an integer type cannot hold (NaN, an infinity, or a value past the
// type's range) is undefined in C++, and the hardware disagrees: x86's cvttsd2si gives INT64_MIN
// for all of them, the GPU's cvt instruction saturates and sends NaN to 0, and a direct
// conversion to uint8 wraps on one and saturates on the other. ember defines one rule, the same
// on both devices (docs/decisions.md):
// - a float becomes int64 by truncation toward zero, saturating: NaN -> 0, +inf and values
//   >= 2^63 -> INT64_MAX, -inf and values < -2^63 -> INT64_MIN;
// - a smaller integer type (uint8) is reached from that int64 by integer conversion, which wraps
//   modulo 2^bits by definition: -1.0 -> 255 and 300.5 -> 44, as PyTorch on the CPU gives.
// convert<To>(v) is every kernel's element conversion, CPU and CUDA (core/kernel_bodies/host_device.h), so a cast,
// a fill and the integer result of an elementwise op follow it alike.
#include <cstdint>
#include <type_traits>

#include "core/kernel_bodies/host_device.h"
#include "core/kernel_bodies/reduced_float.h"

namespace ember {

template <class F>
EMBER_HOST_DEVICE int64_t saturating_int64(F v) {
  // 2^63 is a power of two, exact in float and double; -2^63 itself converts exactly.
  constexpr F kTwo63 = static_cast<F>(9223372036854775808.0);
  if (v != v) return 0;  // NaN
  if (v >= kTwo63) return INT64_MAX;  // the macros, not numeric_limits: device code calls no host function
  if (v < -kTwo63) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// Whether int64 holds v after truncation: -2^63 <= v < 2^63, false for NaN and the infinities.
// Where a value past the range must be an error rather than saturate (a fill value, a count read
// from a file), this is the check.
template <class F>
EMBER_HOST_DEVICE bool fits_in_int64(F v) {
  constexpr F kTwo63 = static_cast<F>(9223372036854775808.0);
  return v >= -kTwo63 && v < kTwo63;
}

// A 16-bit float converts through float both ways (Note [Sixteen-bit floats]): from double that
// rounds twice, as PyTorch's conversion does.
template <class To, class From>
EMBER_HOST_DEVICE To convert(From v) {
  if constexpr (is_sixteen_bit_float<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (is_sixteen_bit_float<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return static_cast<To>(saturating_int64(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ember
