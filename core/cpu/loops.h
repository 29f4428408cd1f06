#pragma once
// Note [CPU elementwise loops]
// Elementwise kernels see operands of one shape but arbitrary strides (views, and stride-0
// broadcasts). for_each_row() first *coalesces* the dims: adjacent dims that every operand walks
// as one (stride[i] == stride[i+1] * shape[i+1]) are merged, so a contiguous tensor of any
// shape becomes one long row and a bias broadcast over a batch becomes a 2-D loop. The kernel
// body then runs once per row with a plain pointer-and-stride inner loop the compiler can
// vectorise when every inner stride is 1. Rows (or, for one long row, chunks of it) are spread
// over OpenMP threads; small tensors stay on one thread because waking the team costs more.
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/cpu_settings.h"
#include "core/tensor.h"

namespace ember::cpu {

// Note [The parallel grain]
// A loop goes over the thread team only past kParallelGrain elements (rows times row length for
// the elementwise loops, an estimate of the work elsewhere). Below it, waking the team costs more
// than the threads save, and both are the machine's. On this project's 2-vCPU VM, with the
// threads asleep between regions (OMP_WAIT_POLICY=PASSIVE, Note [OpenMP wait policy]), an affine
// pass over 32768 floats took 2.8 us on one thread and 8.2 us on two, and two threads stayed
// slower up to 2^20 floats (bench/bench_parallel_grain.cpp): the second vCPU brings arithmetic,
// not memory bandwidth. Ops with more arithmetic per element (exp, erf, Philox, reductions)
// still gain from it, so the grain is a compromise, chosen by the training steps: with 131072
// instead of 32768, the MLP's forward at 2 threads went from 2.3-2.6 to 1.5-1.7 ms and its
// training step from 4.7-5.1 to 3.6-3.9 ms (bench/RESULTS.md, "Products through oneDNN"); one
// thread is unaffected.
inline constexpr int64_t kParallelGrain = 131072;

template <size_t N>
struct RowLayout {
  Shape shape;                       // coalesced; the last dim is the row
  std::array<Shape, N> strides;      // per operand, in elements
  std::array<char*, N> bases;        // per operand, element 0
  std::array<int64_t, N> elem_size;  // per operand
};

template <size_t N>
RowLayout<N> coalesce(const std::array<const Tensor*, N>& ops) {
  RowLayout<N> l;
  const Shape& shape = ops[0]->shape();
  for (size_t k = 0; k < N; ++k) {
    l.bases[k] = static_cast<char*>(ops[k]->raw_data());
    l.elem_size[k] = static_cast<int64_t>(element_size(ops[k]->dtype()));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move a pointer
    bool merge = !l.shape.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = l.strides[k].back() == ops[k]->strides()[d] * shape[d];
    if (merge) {
      l.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) l.strides[k].back() = ops[k]->strides()[d];
    } else {
      l.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) l.strides[k].push_back(ops[k]->strides()[d]);
    }
  }
  if (l.shape.empty()) {  // a 0-d tensor or all dims of size 1: one element
    l.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) l.strides[k].push_back(1);
  }
  return l;
}

// Calls body(ptrs, inner_strides, count) for every row of the operands (see the Note);
// ptrs[k] points at the row's first element of operand k.
template <size_t N, class Body>
void for_each_row(const std::array<const Tensor*, N>& ops, Body body) {
  RowLayout<N> l = coalesce(ops);
  const int64_t ndim = static_cast<int64_t>(l.shape.size());
  const int64_t row = l.shape.back();
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = l.strides[k].back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) rows *= l.shape[static_cast<size_t>(d)];
  const int64_t total = rows * row;

  if (rows == 1) {  // one long row: split it into chunks
    const int64_t chunks = total > kParallelGrain ? (total + kParallelGrain - 1) / kParallelGrain : 1;
#pragma omp parallel for if (chunks > 1) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t begin = c * row / chunks, end = (c + 1) * row / chunks;
      std::array<char*, N> p;
      for (size_t k = 0; k < N; ++k) p[k] = l.bases[k] + begin * inner[k] * l.elem_size[k];
      body(p, inner, end - begin);
    }
    return;
  }
#pragma omp parallel for if (total > kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::array<char*, N> p = l.bases;
    int64_t rem = r;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      int64_t i = rem % l.shape[static_cast<size_t>(d)];
      rem /= l.shape[static_cast<size_t>(d)];
      for (size_t k = 0; k < N; ++k) p[k] += i * l.strides[k][static_cast<size_t>(d)] * l.elem_size[k];
    }
    body(p, inner, row);
  }
}

// Runs fn(i) for i in [0, n) over the OpenMP team when `work` (a rough element count) is large.
template <class Fn>
void parallel_for(int64_t n, int64_t work, Fn fn) {
#pragma omp parallel for if (work > kParallelGrain && n > 1) schedule(static)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// ----------------------------------------------------------------------------------------------
// Note [SIMD dispatch]
// The build targets baseline x86-64 (SSE2), so one binary runs on every x86-64 machine, and GCC
// vectorises our loops 4 floats wide. Hot loops are compiled twice more: for AVX2 + FMA (8 floats
// wide, fused multiply-add) and for AVX-512 (16 floats wide; F, VL, BW and DQ). simd_dispatch(fn)
// runs fn through run_avx512 or run_avx2, copies compiled with gnu::target and gnu::flatten (which
// inlines everything fn calls, so the whole loop, lambdas and the vmath functions below included,
// is generated for those instructions), or plain fn, as simd_level() says: the CPU's widest
// unless set_simd_level or EMBER_SIMD chose a narrower one (core/cpu_settings.h); it returns
// what fn returns. Only per-row work goes through here; OpenMP regions stay outside, so the
// thread team is the same either way. The widest level pays where a loop computes more than it moves: on
// this project's AMD EPYC (Zen 5, whose vector units are 512 bits wide), going from AVX2 to
// AVX-512 took GELU over 4M floats from 4.3 to 2.0 ms, exp from 1.6 to 0.9 ms and a softmax over
// rows of 1000 from 0.17 to 0.11 ms, while an add, which only moves memory, stayed at 1.3 ms
// (bench_core, bench/RESULTS.md).
// What can differ between the copies: GCC contracts `a * b + c` into a fused multiply-add in the
// AVX2 and AVX-512 copies, which rounds once where the SSE2 copy rounds twice, so exp, gelu, an
// affine op, ... can differ in the last bit between levels (all stay within the bounds of Note
// [Vectorisable float math]). Sums and max/min have no multiplies and are bitwise the same at
// every level (Note [Lane reductions]), and so are fingerprints (integer sums);
// tests/test_simd_levels.cpp runs the kernels at every level the CPU has and compares.

#if defined(__x86_64__)
inline bool cpu_has_avx2_fma() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return yes;
}

inline bool cpu_has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }();
  return yes;
}

template <class Fn>
[[gnu::target("avx2,fma"), gnu::flatten]] auto run_avx2(const Fn& fn) {
  return fn();
}

template <class Fn>
[[gnu::target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"), gnu::flatten]] auto run_avx512(const Fn& fn) {
  return fn();
}

template <class Fn>
auto simd_dispatch(const Fn& fn) {
  switch (simd_level()) {
    case SimdLevel::AVX512: return run_avx512(fn);
    case SimdLevel::AVX2: return run_avx2(fn);
    case SimdLevel::Baseline: break;
  }
  return fn();
}
#else  // other architectures: the one portable build of fn
template <class Fn>
auto simd_dispatch(const Fn& fn) {
  return fn();
}
#endif

// ----------------------------------------------------------------------------------------------
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
// drop NaN checks), and libm's scalar functions, about 5-10x slower per element.
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

// erf(x) and e^(-x^2) together. Above |x| = 1 erf needs e^(-x^2), and gelu's derivative needs
// the same factor (the normal density at x sqrt(2)), so one exp serves both.
template <class F>
struct ErfAndGaussian {
  F erf, gaussian;  // erf(x), e^(-x^2)
};

inline ErfAndGaussian<float> erf_and_gaussian(float x) {
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
inline ErfAndGaussian<double> erf_and_gaussian(double x) { return {std::erf(x), std::exp(-x * x)}; }

}  // namespace vmath

// ----------------------------------------------------------------------------------------------
// Note [Lane reductions]
// `for (i) acc += x[i]` is a chain of dependent adds. Float addition is not associative, so the
// compiler may not reorder the chain (that would change the result) and cannot vectorise it:
// each add waits for the previous one (3-4 cycles). Instead a row is cut into blocks, and a block
// is reduced by kLanes independent accumulators, lane l taking elements l, l + kLanes,
// l + 2 kLanes, ...: the loop over the lanes is an elementwise loop (nothing to reorder), so it
// vectorises at any width. Then, in this fixed order:
//   1. the lanes are folded pairwise into the block's result: lane l + w into lane l for
//      w = 16, 8, ..., 1 (vector steps again; a lane-by-lane fold was scalar and, for max,
//      branchy, which cost 25% of max over rows of 1024);
//   2. the block's last n % kLanes elements (all of a row shorter than kLanes, e.g. 10 logits)
//      are folded into that result one by one;
//   3. block results are folded into the row's total in block order.
// The order is written in the code rather than chosen by the compiler, the vector width or the
// thread count, so results are bitwise the same on SSE2 and AVX2 and for any number of threads.
// Accuracy: a float lane that keeps growing loses the small addends, so each lane takes at most
// kLaneRun elements (a block is kLanes * kLaneRun elements) and the folds run in double
// (Op::Total). The rounding error carried by each element is then that of at most kLaneRun float
// additions, whatever the length of the sum: measured relative errors of float32 sums of up to
// 4M elements are 1e-8 to 4e-8 here, 1e-8 to 5e-8 in PyTorch (its cascade sum has a similar
// bound). The old "every element into one double" was more exact but ~10x slower.
// Reductions along a column (over dim 0 of [k, inner], in reduce.cpp) follow the same rule: each
// column's float accumulator takes at most kLaneRun rows before it is folded into a double.
inline constexpr int kLanes = 32;      // 4 AVX registers / 8 SSE registers of floats
inline constexpr int kLaneRun = 128;   // elements per lane per block
inline constexpr int64_t kBlock = int64_t{kLanes} * kLaneRun;

// The reductions: Lane is what a lane accumulates in, Total what block results fold into.
template <class T>
struct SumOp {
  using Lane = T;
  using Total = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  static constexpr Lane identity() { return Lane(0); }
  static Lane step(Lane acc, Lane v) { return acc + v; }
  static Total fold(Total acc, Total v) { return acc + v; }
};

// Max (IsMax) or min. A NaN wins and stays (as in PyTorch): neither comparison is true once the
// accumulator is NaN. Written as a compare and a select, which vectorises; no call per element.
template <class T, bool IsMax>
struct ExtremumOp {
  using Lane = T;
  using Total = T;
  static constexpr T identity() {
    using L = std::numeric_limits<T>;
    if constexpr (L::has_infinity) return IsMax ? -L::infinity() : L::infinity();
    return IsMax ? L::lowest() : L::max();
  }
  static T step(T acc, T v) { return (IsMax ? v > acc : v < acc) || is_nan(v) ? v : acc; }
  static bool is_nan(T v) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(v);  // GCC emits a compare, not a call
    return false;
  }
  static T fold(T acc, T v) { return step(acc, v); }
};
template <class T>
using MaxOp = ExtremumOp<T, true>;
template <class T>
using MinOp = ExtremumOp<T, false>;

// The reductions read their elements through load(i), i in [0, n): a plain array is
// load_from(p); softmax and friends pass a lambda that computes the element (e.g. exp(x[i] - m)).
template <class T>
auto load_from(const T* p) {
  return [p](int64_t i) { return p[i]; };
}

// Folds lane l + w into lane l for w = W, W / 2, ..., 1. The widths are template arguments so
// that every step is a loop of known length: with w a run-time variable the fold was a generic
// loop with scalar paths, and a fifth of a softmax over rows of 256.
template <class Op, int W>
void fold_pairwise(typename Op::Total* total) {
  if constexpr (W > 0) {
    for (int l = 0; l < W; ++l) total[l] = Op::fold(total[l], total[l + W]);
    fold_pairwise<Op, W / 2>(total);
  }
}

// Reduces load(i) for i in [begin, begin + n), n <= kBlock: one block (see the Note).
template <class Op, class Load>
typename Op::Total reduce_block(int64_t begin, int64_t n, const Load& load) {
  using Lane = typename Op::Lane;
  using Total = typename Op::Total;
  const int64_t whole = begin + n - n % kLanes;  // [begin, whole): groups of kLanes elements
  Total result = Op::identity();
  if (whole > begin) {
    Lane acc[kLanes];
    for (int l = 0; l < kLanes; ++l) acc[l] = Op::identity();
    for (int64_t i = begin; i < whole; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] = Op::step(acc[l], static_cast<Lane>(load(i + l)));
    Total total[kLanes];  // pairwise, see the Note
    for (int l = 0; l < kLanes; ++l) total[l] = acc[l];
    fold_pairwise<Op, kLanes / 2>(total);
    result = total[0];
  }
  for (int64_t i = whole; i < begin + n; ++i) result = Op::fold(result, static_cast<Lane>(load(i)));
  return result;
}

// Reduces load(i) for i in [0, n), block by block.
template <class Op, class Load>
typename Op::Total reduce_row(int64_t n, const Load& load) {
  typename Op::Total total = Op::identity();
  for (int64_t b = 0; b < n; b += kBlock) total = Op::fold(total, reduce_block<Op>(b, std::min(kBlock, n - b), load));
  return total;
}

}  // namespace ember::cpu
