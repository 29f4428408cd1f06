#pragma once
// Element types. Kernels are written once as templates and instantiated per dtype through
// dispatch(), so adding a dtype is one line here, not one line per kernel.
#include <cstdint>
#include <ostream>
#include <string>

#include "core/check.h"

namespace ember {

enum class DType : uint8_t { Float32, Float64, Int64, UInt8 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kUInt8 = DType::UInt8;

inline size_t element_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::UInt8: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

inline bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

// Type promotion for binary ops: the "wider" category wins (uint8 < int64 < float32 < float64),
// which is what PyTorch does for tensors of the same dimension category.
inline DType promote(DType a, DType b) {
  auto rank = [](DType t) {
    switch (t) {
      case DType::UInt8: return 0;
      case DType::Int64: return 1;
      case DType::Float32: return 2;
      case DType::Float64: return 3;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };

// Calls fn.template operator()<T>() with the C++ type of `t`.
template <class Fn>
decltype(auto) dispatch(DType t, Fn&& fn) {
  switch (t) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Int64: return fn.template operator()<int64_t>();
    case DType::UInt8: return fn.template operator()<uint8_t>();
  }
  EMBER_FAIL("unknown dtype");
}

// Same, for ops that only make sense on floating point (exp, matmul, softmax, ...).
template <class Fn>
decltype(auto) dispatch_floating(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    default: EMBER_FAIL("[", op, "] expects a floating point tensor, got ", dtype_name(t));
  }
}

}  // namespace ember
