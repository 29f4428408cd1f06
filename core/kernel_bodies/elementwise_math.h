#pragma once
// Note [One math table]
// The unary and binary elementwise ops are written once, here, and both backends instantiate
// these functors: core/cpu/elementwise.cpp inside its vectorised row loops, cuda/elementwise.cu
// inside its grid-stride kernels. So the formula of every op (gelu, its derivative, silu, clamp,
// the comparisons, ...) is the same expression on both devices, and the CPU tests run the very
// code the GPU runs.
//
// What each device brings is its elementary functions, as the `Fns` parameter: static exp, log,
// tanh, erf, sqrt, abs and pow over float and double, and erf_and_gaussian (erf(v) and e^(-v^2)
// together, which the CPU computes with one exp). The CPU passes HostFunctions (the
// vectorisable float versions of Note [Vectorisable float math], libm for double); the GPU passes
// DeviceFunctions (CUDA's libdevice, cuda/elementwise.cu). Those differ by an ulp or so, which is
// what the CUDA tests' tolerance for unary ops allows; everything around them is shared.
//
// The op is a template parameter, so an (op, dtype) pair compiles to straight-line code without a
// switch per element; visit_unary / visit_binary turn the runtime op into that parameter, one
// switch written once for both devices. Integers compute in their own type (Note [Integer
// arithmetic]).
//
// Note [Integer arithmetic]
// int64 and uint8 tensors compute exactly, in their own type, as PyTorch does: a comparison of
// two int64 ids past 2^53 (hashes, large vocabularies) must not see them equal because double
// cannot tell them apart, and INT64_MAX - (INT64_MAX - 1) is 1, not 0. +, -, *, neg, abs and an
// integer power wrap modulo 2^bits on overflow, as PyTorch's do (uint8 255 + 1 is 0): the
// arithmetic is done in the unsigned type of the same width, where wrapping is defined, and
// converted back (C++20 defines that conversion as modular). Signed overflow, undefined in C++,
// never happens. Only the ops that have no integer meaning (exp, tanh, the activations' rows, a
// true division) compute an integer input through double; the ops refuse or promote those before
// a kernel sees an integer tensor, so that path is a fallback, not a result a user gets.
#include <cstdint>
#include <type_traits>

#include "core/kernel_bodies/host_device.h"
#include "core/kernel_bodies/reduced_float.h"

namespace ember::kernels {

// The ops the kernel table's unary and binary slots compute (kernels::unary, kernels::binary).
enum class UnaryOp {
  Neg, Exp, Log, Sqrt, Rsqrt, Abs, Sign, Relu, Sigmoid, Tanh, Gelu,
  Silu,        // x * sigmoid(x)
  GeluTanh,    // gelu's tanh approximation: x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
  PowScalar,   // x ^ a
  Clamp,       // min(max(x, a), b): b where a > b, NaN where x, a or b is NaN
  InRange,     // 1 where a < x < b else 0 (clamp's gradient mask: 0 on a bound, as PyTorch 2.15)
  LeakyRelu,   // x > 0 ? x : a * x
  AffineScalar, // a * x + b (scalar add/mul/sub/div without a 0-d tensor)
  Count         // not an op: how many there are (the tests walk them all)
};

enum class BinaryOp {
  Add, Sub, Mul, Div, Pow,
  Maximum, Minimum,  // a NaN in either operand wins, as in PyTorch
  // Activation backwards, x the upstream gradient (Note [Activation backwards in one pass]):
  ReluGrad,          // x where y > 0 or y is NaN, else 0; y relu's output
  SigmoidGrad,       // x * y * (1 - y); y sigmoid's output
  TanhGrad,          // x * (1 - y * y); y tanh's output
  SiluGrad,          // x * s * (1 + y * (1 - s)) with s = sigmoid(y); y silu's input
  GeluGrad,          // x * (Phi(y) + y * phi(y)); y gelu's input, Phi and phi the normal cdf and pdf
  GeluTanhGrad,      // x * d/dy of the tanh approximation; y its input
  Eq, Ne, Lt, Le, Gt, Ge,  // comparisons last: is_comparison
  Count                    // not an op: how many there are
};
inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op < BinaryOp::Count; }

}  // namespace ember::kernels

namespace ember::math {

using kernels::BinaryOp;
using kernels::UnaryOp;

// The compute type of T: float32, float64 and the integers compute in themselves (Note [Integer
// arithmetic]), the 16-bit floats in float32 (Note [Sixteen-bit floats]: each op's result rounds
// once).
template <class T>
using Compute = std::conditional_t<is_sixteen_bit_float<T>, float, T>;

// Integer +, - and * modulo 2^bits (Note [Integer arithmetic]).
template <class C>
EMBER_HOST_DEVICE C wrapping_add(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
}
template <class C>
EMBER_HOST_DEVICE C wrapping_sub(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(x) - static_cast<U>(y)));
}
template <class C>
EMBER_HOST_DEVICE C wrapping_mul(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
}

// x^e for integers by repeated squaring, wrapping like the product. A negative exponent (an
// integer tensor's: pow with a number exponent takes floating tensors only) gives what the real
// power truncates to: 1 for a base of 1, +-1 for -1, 0 otherwise (0^-e included), as PyTorch's
// integer pow.
template <class C>
EMBER_HOST_DEVICE C integer_power(C x, C e) {
  if constexpr (std::is_signed_v<C>) {
    if (e < 0) {
      if (x == 1) return C(1);
      if (x == -1) return (e & 1) ? C(-1) : C(1);
      return C(0);
    }
  }
  C result = 1;
  while (e != 0) {
    if (e & 1) result = wrapping_mul(result, x);
    x = wrapping_mul(x, x);
    e = static_cast<C>(e >> 1);
  }
  return result;
}

// The ops with an exact integer form; the others compute an integer through double.
template <UnaryOp kOp>
inline constexpr bool unary_has_integer_form =
    kOp == UnaryOp::Neg || kOp == UnaryOp::Abs || kOp == UnaryOp::Sign || kOp == UnaryOp::Relu ||
    kOp == UnaryOp::PowScalar || kOp == UnaryOp::Clamp || kOp == UnaryOp::InRange || kOp == UnaryOp::AffineScalar;
template <BinaryOp kOp>
inline constexpr bool binary_has_integer_form = kOp == BinaryOp::Add || kOp == BinaryOp::Sub || kOp == BinaryOp::Mul ||
                                                kOp == BinaryOp::Pow || kOp == BinaryOp::Maximum ||
                                                kOp == BinaryOp::Minimum || kOp >= BinaryOp::Eq;

// v < 0 without a comparison of an unsigned type with zero (a warning, and always false).
template <class C>
EMBER_HOST_DEVICE bool is_negative(C v) {
  if constexpr (std::is_unsigned_v<C>) return false;
  else return v < C(0);
}
// v != v, the NaN test, written as a compare (it vectorises); an integer is never NaN.
template <class C>
EMBER_HOST_DEVICE bool is_nan_value(C v) {
  if constexpr (std::is_integral_v<C>) return false;
  else return v != v;
}

template <class C>
struct ErfAndGaussian {
  C erf, gaussian;  // erf(v), e^(-v^2)
};

// The tanh approximation of gelu: u(v) = sqrt(2 / pi) * (v + 0.044715 v^3) and its slope du/dv.
template <class C>
EMBER_HOST_DEVICE C gelu_tanh_argument(C v) {
  return static_cast<C>(0.79788456080286535588) * (v + static_cast<C>(0.044715) * v * v * v);
}
template <class C>
EMBER_HOST_DEVICE C gelu_tanh_slope(C v) {
  return static_cast<C>(0.79788456080286535588) * (C(1) + static_cast<C>(3 * 0.044715) * v * v);
}

template <UnaryOp kOp, class C, class Fns>
struct UnaryMath {
  C a, b;  // the op's scalar arguments
  EMBER_HOST_DEVICE auto operator()(C v) const {
    if constexpr (std::is_integral_v<C> && !unary_has_integer_form<kOp>) {
      return UnaryMath<kOp, double, Fns>{static_cast<double>(a), static_cast<double>(b)}(static_cast<double>(v));
    } else if constexpr (std::is_integral_v<C>) {
      return integer(v);
    } else {
      return floating(v);
    }
  }

 private:
  EMBER_HOST_DEVICE C integer(C v) const {
    if constexpr (kOp == UnaryOp::Neg) return wrapping_sub(C(0), v);
    // abs(INT64_MIN) wraps to INT64_MIN, as in PyTorch
    else if constexpr (kOp == UnaryOp::Abs) return is_negative(v) ? wrapping_sub(C(0), v) : v;
    else if constexpr (kOp == UnaryOp::PowScalar) return integer_power(v, a);
    else if constexpr (kOp == UnaryOp::AffineScalar) return wrapping_add(wrapping_mul(a, v), b);
    else return floating(v);  // sign, relu, clamp, in-range: comparisons, exact in any type
  }
  EMBER_HOST_DEVICE C floating(C v) const {
    constexpr C kSqrt1_2 = static_cast<C>(0.70710678118654752440);
    if constexpr (kOp == UnaryOp::Neg) return -v;
    else if constexpr (kOp == UnaryOp::Exp) return Fns::exp(v);
    else if constexpr (kOp == UnaryOp::Log) return Fns::log(v);
    else if constexpr (kOp == UnaryOp::Sqrt) return Fns::sqrt(v);
    else if constexpr (kOp == UnaryOp::Rsqrt) return C(1) / Fns::sqrt(v);
    else if constexpr (kOp == UnaryOp::Abs) return Fns::abs(v);
    else if constexpr (kOp == UnaryOp::Sign) return C((v > C(0)) - is_negative(v));
    else if constexpr (kOp == UnaryOp::Relu) return is_negative(v) ? C(0) : v;  // NaN and -0.0 pass, as in PyTorch
    else if constexpr (kOp == UnaryOp::Sigmoid) return C(1) / (C(1) + Fns::exp(-v));
    else if constexpr (kOp == UnaryOp::Tanh) return Fns::tanh(v);
    else if constexpr (kOp == UnaryOp::Gelu) return C(0.5) * v * (C(1) + Fns::erf(v * kSqrt1_2));
    else if constexpr (kOp == UnaryOp::Silu) return v / (C(1) + Fns::exp(-v));
    else if constexpr (kOp == UnaryOp::GeluTanh) return C(0.5) * v * (C(1) + Fns::tanh(gelu_tanh_argument(v)));
    else if constexpr (kOp == UnaryOp::PowScalar) return Fns::pow(v, a);
    else if constexpr (kOp == UnaryOp::Clamp) {
      const C raised = v < a || is_nan_value(a) ? a : v;  // a NaN bound gives NaN, as in PyTorch
      return raised > b || is_nan_value(b) ? b : raised;
    } else if constexpr (kOp == UnaryOp::InRange) return C(v > a && v < b);
    else if constexpr (kOp == UnaryOp::LeakyRelu) return v > 0 ? v : a * v;
    else if constexpr (kOp == UnaryOp::AffineScalar) return a * v + b;
    else static_assert(kOp != kOp, "UnaryOp without a row in the math table");
  }
};

// Comparisons (the ops from Eq on, see kernels::is_comparison) give a bool, stored as uint8.
template <BinaryOp kOp, class T>
using BinaryResult = std::conditional_t<(kOp >= BinaryOp::Eq), uint8_t, T>;

// The activations' backward rows (ReluGrad ... GeluGrad) take x = the upstream gradient and y =
// what the forward saved: Note [Activation backwards in one pass] in core/ops/elementwise.cpp.
template <BinaryOp kOp, class C, class Fns>
struct BinaryMath {
  EMBER_HOST_DEVICE auto operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C> && !binary_has_integer_form<kOp>) {
      return BinaryMath<kOp, double, Fns>{}(static_cast<double>(x), static_cast<double>(y));
    } else if constexpr (std::is_integral_v<C>) {
      return integer(x, y);
    } else {
      return floating(x, y);
    }
  }

 private:
  EMBER_HOST_DEVICE auto integer(C x, C y) const {
    if constexpr (kOp == BinaryOp::Add) return wrapping_add(x, y);
    else if constexpr (kOp == BinaryOp::Sub) return wrapping_sub(x, y);
    else if constexpr (kOp == BinaryOp::Mul) return wrapping_mul(x, y);
    else if constexpr (kOp == BinaryOp::Pow) return integer_power(x, y);
    else return floating(x, y);  // the comparisons, maximum and minimum are exact in any type
  }
  EMBER_HOST_DEVICE auto floating(C x, C y) const {
    constexpr C kSqrt1_2 = static_cast<C>(0.70710678118654752440);
    constexpr C kInvSqrt2Pi = static_cast<C>(0.39894228040143267794);
    if constexpr (kOp == BinaryOp::Add) return x + y;
    else if constexpr (kOp == BinaryOp::Sub) return x - y;
    else if constexpr (kOp == BinaryOp::Mul) return x * y;
    else if constexpr (kOp == BinaryOp::Div) return x / y;
    else if constexpr (kOp == BinaryOp::Pow) return Fns::pow(x, y);
    // Written as compares and a select, so the CPU loops still vectorise.
    else if constexpr (kOp == BinaryOp::Maximum) return x > y || is_nan_value(x) ? x : y;
    else if constexpr (kOp == BinaryOp::Minimum) return x < y || is_nan_value(x) ? x : y;
    else if constexpr (kOp == BinaryOp::ReluGrad) return y <= C(0) ? C(0) : x;
    else if constexpr (kOp == BinaryOp::SigmoidGrad) return x * (y * (C(1) - y));
    else if constexpr (kOp == BinaryOp::TanhGrad) return x * (C(1) - y * y);
    else if constexpr (kOp == BinaryOp::SiluGrad) {
      const C s = C(1) / (C(1) + Fns::exp(-y));
      return x * (s * (C(1) + y * (C(1) - s)));
    }
    else if constexpr (kOp == BinaryOp::GeluGrad) {  // Phi(y) + y phi(y), phi(y) = e^(-(y / sqrt 2)^2) / sqrt(2 pi)
      const ErfAndGaussian<C> e = Fns::erf_and_gaussian(y * kSqrt1_2);
      return x * (C(0.5) * (C(1) + e.erf) + y * kInvSqrt2Pi * e.gaussian);
    }
    else if constexpr (kOp == BinaryOp::GeluTanhGrad) {  // (1 + t) / 2 + y / 2 * (1 - t^2) * du/dy, u's tanh t
      const C t = Fns::tanh(gelu_tanh_argument(y));
      return x * (C(0.5) * (C(1) + t) + C(0.5) * y * (C(1) - t * t) * gelu_tanh_slope(y));
    }
    else if constexpr (kOp == BinaryOp::Eq) return x == y;
    else if constexpr (kOp == BinaryOp::Ne) return x != y;
    else if constexpr (kOp == BinaryOp::Lt) return x < y;
    else if constexpr (kOp == BinaryOp::Le) return x <= y;
    else if constexpr (kOp == BinaryOp::Gt) return x > y;
    else if constexpr (kOp == BinaryOp::Ge) return x >= y;
    else static_assert(kOp != kOp, "BinaryOp without a row in the math table");
  }
};

// Calls fn.template operator()<kOp>() with the runtime `op` as a template argument:
//   visit_unary(op, [&]<UnaryOp kOp>() { launch<T, kOp>(...); });
// Returns false for a value outside the enum (the caller reports it).
template <class Fn>
bool visit_unary(UnaryOp op, Fn&& fn) {
  switch (op) {
    case UnaryOp::Neg: fn.template operator()<UnaryOp::Neg>(); return true;
    case UnaryOp::Exp: fn.template operator()<UnaryOp::Exp>(); return true;
    case UnaryOp::Log: fn.template operator()<UnaryOp::Log>(); return true;
    case UnaryOp::Sqrt: fn.template operator()<UnaryOp::Sqrt>(); return true;
    case UnaryOp::Rsqrt: fn.template operator()<UnaryOp::Rsqrt>(); return true;
    case UnaryOp::Abs: fn.template operator()<UnaryOp::Abs>(); return true;
    case UnaryOp::Sign: fn.template operator()<UnaryOp::Sign>(); return true;
    case UnaryOp::Relu: fn.template operator()<UnaryOp::Relu>(); return true;
    case UnaryOp::Sigmoid: fn.template operator()<UnaryOp::Sigmoid>(); return true;
    case UnaryOp::Tanh: fn.template operator()<UnaryOp::Tanh>(); return true;
    case UnaryOp::Gelu: fn.template operator()<UnaryOp::Gelu>(); return true;
    case UnaryOp::Silu: fn.template operator()<UnaryOp::Silu>(); return true;
    case UnaryOp::GeluTanh: fn.template operator()<UnaryOp::GeluTanh>(); return true;
    case UnaryOp::PowScalar: fn.template operator()<UnaryOp::PowScalar>(); return true;
    case UnaryOp::Clamp: fn.template operator()<UnaryOp::Clamp>(); return true;
    case UnaryOp::InRange: fn.template operator()<UnaryOp::InRange>(); return true;
    case UnaryOp::LeakyRelu: fn.template operator()<UnaryOp::LeakyRelu>(); return true;
    case UnaryOp::AffineScalar: fn.template operator()<UnaryOp::AffineScalar>(); return true;
    case UnaryOp::Count: break;
  }
  return false;
}

template <class Fn>
bool visit_binary(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::Add: fn.template operator()<BinaryOp::Add>(); return true;
    case BinaryOp::Sub: fn.template operator()<BinaryOp::Sub>(); return true;
    case BinaryOp::Mul: fn.template operator()<BinaryOp::Mul>(); return true;
    case BinaryOp::Div: fn.template operator()<BinaryOp::Div>(); return true;
    case BinaryOp::Pow: fn.template operator()<BinaryOp::Pow>(); return true;
    case BinaryOp::Maximum: fn.template operator()<BinaryOp::Maximum>(); return true;
    case BinaryOp::Minimum: fn.template operator()<BinaryOp::Minimum>(); return true;
    case BinaryOp::ReluGrad: fn.template operator()<BinaryOp::ReluGrad>(); return true;
    case BinaryOp::SigmoidGrad: fn.template operator()<BinaryOp::SigmoidGrad>(); return true;
    case BinaryOp::TanhGrad: fn.template operator()<BinaryOp::TanhGrad>(); return true;
    case BinaryOp::SiluGrad: fn.template operator()<BinaryOp::SiluGrad>(); return true;
    case BinaryOp::GeluGrad: fn.template operator()<BinaryOp::GeluGrad>(); return true;
    case BinaryOp::GeluTanhGrad: fn.template operator()<BinaryOp::GeluTanhGrad>(); return true;
    case BinaryOp::Eq: fn.template operator()<BinaryOp::Eq>(); return true;
    case BinaryOp::Ne: fn.template operator()<BinaryOp::Ne>(); return true;
    case BinaryOp::Lt: fn.template operator()<BinaryOp::Lt>(); return true;
    case BinaryOp::Le: fn.template operator()<BinaryOp::Le>(); return true;
    case BinaryOp::Gt: fn.template operator()<BinaryOp::Gt>(); return true;
    case BinaryOp::Ge: fn.template operator()<BinaryOp::Ge>(); return true;
    case BinaryOp::Count: break;
  }
  return false;
}

// Dropout's forward and backward (kernels::masked_scale): x scaled where the mask keeps it, 0
// where it drops it.
template <class T>
EMBER_HOST_DEVICE T masked_scale(uint8_t keep, T x, T scale) {
  return keep ? x * scale : T(0);
}

}  // namespace ember::math
