#pragma once
// Sums, maxima and minima of a row in a fixed order of independent lanes, so they vectorise and
// give the same bits at every SIMD level.
#include <algorithm>
#include <cstdint>

#include "core/kernel_bodies/reduction_rules.h"

namespace ember::cpu {

// Note [Lane reductions]
// `for (i) acc += x[i]` is a chain of dependent adds. Float addition is not associative, so the
// compiler may not reorder the chain (that would change the result) and cannot vectorise it:
// each add waits for the previous one (3-4 cycles). Instead a row is cut into blocks, and a block
// is reduced by kLanes independent accumulators, lane l taking elements l, l + kLanes,
// l + 2 kLanes, ...: the loop over the lanes is an elementwise loop (nothing to reorder), so it
// vectorises at any width. Then, in this fixed order:
//   1. the lanes are folded pairwise into the block's result: lane l + w into lane l for
//      w = 16, 8, ..., 1 (vector steps again; a lane-by-lane fold was scalar and, for max,
//      branchy, a real cost in max over rows of 1024: bench/RESULTS.md, "Figures that code
//      comments used to quote");
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
// bound). The old "every element into one double" was more exact but much slower
// (bench/RESULTS.md, "Figures that code comments used to quote").
// Reductions along a column (over dim 0 of [k, inner], in reduce.cpp) follow the same rule: each
// column's float accumulator takes at most kLaneRun rows before it is folded into a double.
inline constexpr int kLanes = 32;      // 4 AVX registers / 8 SSE registers of floats
inline constexpr int kLaneRun = 128;   // elements per lane per block
inline constexpr int64_t kBlock = int64_t{kLanes} * kLaneRun;

// The reductions: Lane is what a lane accumulates in, Total what block results fold into. What a
// sum totals in and how an extremum meets a NaN are the rules both devices share
// (core/kernel_bodies/reduction_rules.h); a float sum's lanes stay in the element type for speed
// (see the Note for why that loses nothing).
template <class T>
struct SumOp {
  using Lane = T;
  using Total = math::SumTotal<T>;
  static constexpr Lane identity() { return Lane(0); }
  static Lane step(Lane acc, Lane v) { return math::sum_add(acc, v); }
  static Total fold(Total acc, Total v) { return math::sum_add(acc, v); }
};

template <class T, bool IsMax>
struct ExtremumOp {
  using Lane = T;
  using Total = T;
  static constexpr T identity() { return math::kExtremumIdentity<IsMax, T>; }
  static T step(T acc, T v) { return math::extremum_step<IsMax>(acc, v); }
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
// loop with scalar paths, and a real part of a softmax over rows of 256 (bench/RESULTS.md,
// "Figures that code comments used to quote").
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
