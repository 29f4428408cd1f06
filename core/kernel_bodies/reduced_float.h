#pragma once
// The two 16-bit floating-point element types, bfloat16 and float16, and their conversions to and
// from float, shared by the CPU and CUDA kernels.
//
// Note [Sixteen-bit floats]
// Both keep a sign bit and trade exponent for mantissa differently:
//   float32   1 sign |  8 exponent | 23 mantissa   (bias 127)
//   bfloat16  1 sign |  8 exponent |  7 mantissa   (bias 127): float32's range, 3 significant digits
//   float16   1 sign |  5 exponent | 10 mantissa   (bias 15):  max 65504, 2^-24 the smallest step
// bfloat16 is float32 with the low 16 bits cut off, so widening is a shift and narrowing rounds
// those 16 bits away. float16 has its own exponent, so both directions rebias it, and narrowing
// also handles what float16 cannot hold: values from 65520 up become infinity, and values under
// 2^-14 become denormals (or zero) with the rounding done at the denormal's last bit.
// Narrowing rounds to nearest, ties to even, on the bit pattern: adding 0111..1 plus the lowest
// kept bit to the dropped bits carries into the kept ones exactly when the dropped part is over
// a half, or exactly a half with the kept part odd; a carry out of the mantissa steps the
// exponent, which is the right answer, up to infinity.
// NaN narrows as PyTorch's CPU conversion does (bitwise, so files and tests compare exactly):
// every bfloat16 NaN becomes 0xFFFF; a float16 NaN keeps its sign and the top of its payload and
// is made quiet (the F16C instruction's rule, which PyTorch 2.15 follows; 1.13 gave 0x7E00).
// Widening is exact, but for float16 NaNs, which come out quiet (F16C's rule again; a bfloat16
// NaN widens bit for bit, as in PyTorch). Arithmetic on these types happens in float (the implicit conversion), which
// is what PyTorch does too: a 16-bit type is a storage format, float the computing one.
#include <cstdint>
#include <cstring>

#include "core/kernel_bodies/host_device.h"

namespace ember {

namespace reduced_float {

EMBER_HOST_DEVICE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

EMBER_HOST_DEVICE float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds away the low `drop` bits of u to nearest, ties to even (Note [Sixteen-bit floats]).
EMBER_HOST_DEVICE uint32_t round_off_bits(uint32_t u, int drop) {
  const uint32_t half_minus_one = (1u << (drop - 1)) - 1u;
  return (u + half_minus_one + ((u >> drop) & 1u)) >> drop;
}

EMBER_HOST_DEVICE uint16_t bfloat16_from_float(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffff;  // NaN
  return static_cast<uint16_t>(round_off_bits(u, 16));
}

EMBER_HOST_DEVICE float bfloat16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

EMBER_HOST_DEVICE uint16_t float16_from_float(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude & 0x7fffffu) >> 13));  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (magnitude >= 0x38800000u) {  // >= 2^-14: a normal float16; rebias the exponent by 127 - 15
    return static_cast<uint16_t>(sign | round_off_bits(magnitude - (112u << 23), 13));
  }
  if (magnitude <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25: rounds to zero
  // A denormal: the value in units of 2^-24 is the 24-bit significand shifted right by
  // -(exponent + 1), which is between 15 and 24 places here.
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | round_off_bits(significand, -(exponent + 1)));
}

EMBER_HOST_DEVICE float float16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // infinity, or a NaN, made quiet
    return bits_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u));
  }
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or a denormal, mantissa * 2^-24: exact in float, and float arithmetic is exact here.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return bits_float(sign | float_bits(magnitude));
}

}  // namespace reduced_float

// A 16-bit float as stored in a tensor. It converts to float implicitly and from float (and so
// from any arithmetic type, through float) on construction, so generic code reads and writes it
// like a float. Format names the bit layout: its from_float and to_float.
template <class Format>
struct SixteenBitFloat {
  uint16_t bits;

  SixteenBitFloat() = default;
  EMBER_HOST_DEVICE SixteenBitFloat(float f) : bits(Format::from_float(f)) {}  // NOLINT: float-like
  EMBER_HOST_DEVICE operator float() const { return Format::to_float(bits); }  // NOLINT

  EMBER_HOST_DEVICE static SixteenBitFloat from_bits(uint16_t b) {
    SixteenBitFloat v;
    v.bits = b;
    return v;
  }
};

namespace reduced_float {
struct BFloat16Format {
  EMBER_HOST_DEVICE static uint16_t from_float(float f) { return bfloat16_from_float(f); }
  EMBER_HOST_DEVICE static float to_float(uint16_t h) { return bfloat16_to_float(h); }
};
struct Float16Format {
  EMBER_HOST_DEVICE static uint16_t from_float(float f) { return float16_from_float(f); }
  EMBER_HOST_DEVICE static float to_float(uint16_t h) { return float16_to_float(h); }
};
}  // namespace reduced_float

using bfloat16 = SixteenBitFloat<reduced_float::BFloat16Format>;
using float16 = SixteenBitFloat<reduced_float::Float16Format>;

template <class T>
inline constexpr bool is_sixteen_bit_float = false;
template <>
inline constexpr bool is_sixteen_bit_float<bfloat16> = true;
template <>
inline constexpr bool is_sixteen_bit_float<float16> = true;

}  // namespace ember
