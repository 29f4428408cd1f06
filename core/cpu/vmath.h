#pragma once
// Float math that vectorises: exp, log, tanh and erf as straight-line code.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/kernel_bodies/elementwise_math.h"

namespace ember::cpu {

// Note [Vectorisable float math]
// std::exp(float) and friends are calls into libm, one element at a time, so a loop around them
// cannot be vectorised. The float versions here are straight-line code (multiplies, adds,
// compares that select, integer tricks on the bits) that GCC vectorises like an add. Each one
// reduces its argument to a small interval and evaluates a polynomial there:
//   exp:  x = n ln2 + r, |r| <= ln2/2 (ln2 split in a part whose products with n are exact
//         and a small correction); e^x = 2^n e^r with the Taylor polynomial of degree 7
//         (truncation < 2^-27 relative); 2^n is built directly in the exponent bits, as two
//         factors so that results in the subnormal range come out right.
//   log:  x = 2^e m, m in [sqrt(1/2), sqrt(2)); log x = e ln2 + 2 atanh(s), s = (m-1)/(m+1),
//         |s| < 0.172, with the atanh series up to s^9 (truncation < 2^-28 relative).
//   tanh: |x| < 0.625: x + x^3 P(x^2); above: 1 - 2 / (e^(2|x|) + 1) with the sign of x. (The
//         second form cancels for small |x|, hence the polynomial there.)
//   erf:  |x| < 1: x P(x^2); above: 1 - e^(-x^2) R(|x|), with the sign of x, where R(a) =
//         erfc(a) e^(a^2) is smooth and slowly varying (from 0.43 at 1 to 0.14 at 4); beyond
//         |x| = 4, erf rounds to +-1 in float.
// P and R are our own fits (least squares on Chebyshev nodes, reweighted towards minimax, in
// double against 40-digit mpmath references; rounded to float). Measured against the double
// precision C library over every float input, in both the SSE2 and the AVX2+FMA build: exp
// <= 1.06 ulp, log <= 0.96 ulp, tanh <= 1.33 ulp, erf <= 1.5 ulp (<= 9e-8 absolute), and
// sigmoid = 1 / (1 + exp(-x)) <= 2.5 ulp (it returns 0 below -88.7, where the exact result is a
// subnormal under 3e-39).
// Special values follow the C library: NaN in, NaN out; exp(-inf) = 0, exp(inf) = inf,
// log(0) = -inf, log(x < 0) = NaN, tanh(+-inf) = +-1, erf(+-inf) = +-1.
// The double overloads call the C library: float64 is the accuracy dtype (gradcheck).
// Not used: libmvec through -ffast-math (not allowed here: it would also reorder our sums and
// drop NaN checks), and libm's scalar functions, several times slower per element
// (bench/RESULTS.md, "Figures that code comments used to quote").
namespace vmath {

// 2^n as a float, for n in [-126, 127]: the biased exponent, shifted into place. (Other n, which
// only NaN inputs produce, give garbage that the NaN in the other factor overrides.)
inline float pow2i(int32_t n) { return std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23); }

inline float exp(float x) {
  constexpr float kLog2e = 1.44269504f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 15 significant bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860677e-6f;      // ln 2 - kLn2Hi
  constexpr float kRound = 0x1.8p23f;           // t + kRound rounds t to an integer (ulp is 1)
  x = x < -104.0f ? -104.0f : x;  // e^-104 rounds to 0 (NaN passes both clamps)
  x = x > 89.0f ? 89.0f : x;      // e^89 overflows to inf
  const float shifted = x * kLog2e + kRound;
  const float n = shifted - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  const float q = 1.0f / 2 + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))));
  const float p = 1.0f + (r + r * r * q);
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);  // n as an integer
  const int32_t half = ni >> 1;  // n in [-150, 128]: both factors below are normal floats
  return p * pow2i(half) * pow2i(ni - half);
}

inline float log(float x) {
  constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860677e-6f;  // as in exp
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const bool subnormal = x < 0x1p-126f;  // scale those up by 2^23 first (0 and x < 0 too; fixed below)
  const int32_t bits = std::bit_cast<int32_t>(subnormal ? x * 0x1p23f : x);
  const float m1 = std::bit_cast<float>((bits & 0x007fffff) | 0x3f800000);  // mantissa in [1, 2)
  const int32_t e1 = (bits >> 23) - 127 - (subnormal ? 23 : 0);
  const bool high = m1 > 1.41421354f;  // move m to [sqrt(1/2), sqrt(2)): |s| stays small
  const float m = high ? 0.5f * m1 : m1;
  const float e = static_cast<float>(high ? e1 + 1 : e1);
  const float f = m - 1.0f;  // exact
  const float s = f / (2.0f + f), s2 = s * s;
  // 2 atanh(s) = 2s + s^3 Q(s^2), and 2s = f - s f: the exact f leads, s only enters a correction
  const float log_m = f - s * (f - s2 * (2.0f / 3 + s2 * (2.0f / 5 + s2 * (2.0f / 7 + s2 * (2.0f / 9)))));
  const float y = e * kLn2Hi + (log_m + e * kLn2Lo);
  return x > 0 ? (x < kInf ? y : x) : (x == 0 ? -kInf : std::numeric_limits<float>::quiet_NaN());
}

// tanh and erf are odd: both work on a = |x| and put the sign of x back (-0 stays -0).
inline float tanh(float x) {
  const float a = std::abs(x), u = a * a;
  const float poly = a + a * u * (-0.333333313f + u * (0.133332059f + u * (-0.0539467633f + u * (0.0217007045f +
                                  u * (-0.00817740057f + u * 0.0021429637f)))));
  const float big = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);  // NaN stays NaN here
  return std::copysign(a < 0.625f ? poly : big, x);
}

// erf(x) and e^(-x^2) together (math::ErfAndGaussian, the math table's pair). Above |x| = 1 erf
// needs e^(-x^2), and gelu's derivative needs the same factor (the normal density at x sqrt(2)),
// so one exp serves both.
inline math::ErfAndGaussian<float> erf_and_gaussian(float x) {
  const float a = std::abs(x), u = a * a;
  // a P(a^2) with P(0) = 2/sqrt(pi) = 1 + 0.128...: adding the exact a last keeps the rounding small
  const float poly = a + a * (0.128379166f + u * (-0.37612626f + u * (0.112836003f + u * (-0.026854448f + u * (
                                     0.00518954173f + u * (-0.00080208946f + u * 7.88928373e-05f))))));
  const float ac = a > 4.0f ? 4.0f : a;  // R's fit ends at 4
  const float t = ac - 2.5f;
  const float r = 0.210806549f + t * (-0.074299708f + t * (0.0251577962f + t * (-0.00780434255f + t * (
                  0.00196610647f + t * (-0.00196230179f + t * (-0.000800335896f + t * -0.000388881919f))))));
  const float gaussian = exp(-u);
  const float big = a > 4.0f ? 1.0f : 1.0f - gaussian * r;  // erf(4) already rounds to 1 (NaN passes)
  return {std::copysign(a < 1.0f ? poly : big, x), gaussian};
}

inline float erf(float x) { return erf_and_gaussian(x).erf; }

inline double exp(double x) { return std::exp(x); }
inline double log(double x) { return std::log(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double erf(double x) { return std::erf(x); }
inline math::ErfAndGaussian<double> erf_and_gaussian(double x) { return {std::erf(x), std::exp(-x * x)}; }

}  // namespace vmath

}  // namespace ember::cpu
