#pragma once
// Element types. Kernels are written once as templates and instantiated per dtype through
// dispatch(), so adding a dtype is one line here, not one line per kernel.
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>

#include "core/check.h"
#include "core/convert.h"
#include "core/kernel_bodies/reduced_float.h"

namespace ember {

// The values travel between processes (the distributed collectives' checks send them), so new
// dtypes go at the end.
enum class DType : uint8_t { Float32, Float64, Int64, UInt8, BFloat16, Float16 };

// A DType a caller made from a number must be one of the enumerators (Note [Enums from callers]
// in core/device.h).
inline void check_dtype(DType t, const char* op) { check_enum(t, DType::Float16, op, "dtype"); }

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;  // PyTorch's other name for it

inline size_t element_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::UInt8: return 1;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
  }
  return "?";
}

// bfloat16 and float16 (Note [Sixteen-bit floats]).
inline bool is_sixteen_bit(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

inline bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64 || is_sixteen_bit(t); }

// Type promotion for binary ops, as PyTorch's for tensors of the same dimension category: the
// wider category wins (uint8 < int64 < the 16-bit floats < float32 < float64), and bfloat16 with
// float16, neither of which holds the other, meet in float32.
inline DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_sixteen_bit(a) && is_sixteen_bit(b)) return DType::Float32;
  auto rank = [](DType t) {
    switch (t) {
      case DType::UInt8: return 0;
      case DType::Int64: return 1;
      case DType::BFloat16: return 2;
      case DType::Float16: return 2;
      case DType::Float32: return 3;
      case DType::Float64: return 4;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

// The limits of a floating dtype, PyTorch's torch.finfo: eps is the gap between 1 and the next
// value, tiny the smallest normal, max the largest finite value.
struct FloatInfo {
  int bits;
  double eps, tiny, max;
};
inline FloatInfo finfo(DType t) {
  switch (t) {
    case DType::Float32: return {32, 0x1p-23, 0x1p-126, 0x1.fffffep127};
    case DType::Float64: return {64, 0x1p-52, 0x1p-1022, 0x1.fffffffffffffp1023};
    case DType::BFloat16: return {16, 0x1p-7, 0x1p-126, 0x1.fep127};
    case DType::Float16: return {16, 0x1p-10, 0x1p-14, 65504.0};
    default: EMBER_FAIL("[finfo] expects a floating point dtype, got ", dtype_name(t));
  }
}

// Whether `value` converts to `dtype` without overflow, as PyTorch asks of a fill value: a
// floating dtype holds NaN, the infinities and every number up to its largest finite one in
// magnitude (1e300 overflows float32 and both 16-bit floats); an integer dtype holds the numbers
// in its range after truncation, and neither NaN nor an infinity.
inline bool holds_value(DType dtype, double value) {
  if (is_floating(dtype)) return !std::isfinite(value) || std::fabs(value) <= finfo(dtype).max;
  if (dtype == DType::UInt8) return value > -1.0 && value < 256.0;
  return fits_in_int64(value);
}

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float16> { static constexpr DType value = DType::Float16; };

// Calls fn.template operator()<T>() with the C++ type of `t`, for the dtypes kernels compute in.
// The 16-bit floats reach a kernel only where it says it takes them (Note [Sixteen-bit floats
// through float32] in core/through_float32.h), so a dtype missing here is a kernel that forgot to.
template <class Fn>
decltype(auto) dispatch(DType t, Fn&& fn) {
  switch (t) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Int64: return fn.template operator()<int64_t>();
    case DType::UInt8: return fn.template operator()<uint8_t>();
    default: EMBER_FAIL("[dispatch] a kernel without a ", dtype_name(t), " path was given a ", dtype_name(t), " tensor");
  }
}

// Same, for the kernels that only move or convert elements (fill, copy, printing): every dtype.
template <class Fn>
decltype(auto) dispatch_any(DType t, Fn&& fn) {
  switch (t) {
    case DType::BFloat16: return fn.template operator()<bfloat16>();
    case DType::Float16: return fn.template operator()<float16>();
    default: return dispatch(t, static_cast<Fn&&>(fn));
  }
}

// Same, for ops that only make sense on floating point (exp, matmul, softmax, ...).
template <class Fn>
decltype(auto) dispatch_floating(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::BFloat16:
    case DType::Float16: EMBER_FAIL("[", op, "] has no ", dtype_name(t), " kernel");
    default: EMBER_FAIL("[", op, "] expects a floating point tensor, got ", dtype_name(t));
  }
}

// Same, for the kernels that compute on every floating dtype, the 16-bit ones in float32 through
// math::Compute (Note [Sixteen-bit elementwise loops] in core/cpu/elementwise.cpp).
template <class Fn>
decltype(auto) dispatch_floating_or_sixteen_bit(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::BFloat16: return fn.template operator()<bfloat16>();
    case DType::Float16: return fn.template operator()<float16>();
    default: return dispatch_floating(t, op, static_cast<Fn&&>(fn));
  }
}

}  // namespace ember
