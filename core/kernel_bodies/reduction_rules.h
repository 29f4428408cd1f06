#pragma once
// The rules every reduction follows on both devices: what a sum accumulates in, how a maximum or a
// minimum meets a NaN, and which element argmax picks. core/cpu/lane_reductions.h and
// cuda/block_reduce.cuh (and the CPU's sort and argmax) fold with these; the devices differ only in
// the order of the fold (Note [Lane reductions], Note [One block per output]).
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernel_bodies/host_device.h"

namespace ember::math {

// A floating sum totals in double whatever the element type; an integer sum in its own type,
// wrapping on overflow as PyTorch's (Note [Integer arithmetic]): signed overflow would be undefined.
template <class T>
using SumTotal = std::conditional_t<std::is_floating_point_v<T>, double, T>;

template <class A>
EMBER_HOST_DEVICE A sum_add(A acc, A v) {
  if constexpr (std::is_integral_v<A>) return wrapping_add(acc, v);
  else return acc + v;
}

// Max (IsMax) or min. A NaN wins and stays, as in PyTorch: once the accumulator is NaN neither
// comparison is true. A compare and a select, so a loop of it vectorises.
template <bool IsMax, class T>
EMBER_HOST_DEVICE T extremum_step(T acc, T v) {
  return (IsMax ? v > acc : v < acc) || is_nan_value(v) ? v : acc;
}

// The value no element loses to: -inf for a maximum (+inf for a minimum), or the type's end. A
// constant, so device code can use it (numeric_limits itself is host code).
template <bool IsMax, class T>
inline constexpr T kExtremumIdentity = [] {
  using L = std::numeric_limits<T>;
  if constexpr (L::has_infinity) return IsMax ? -L::infinity() : L::infinity();
  else return IsMax ? L::lowest() : L::max();
}();

// Note [Argmax under a total order]
// argmax returns the first maximum, a NaN counting as greater than everything (PyTorch's argmax:
// the first NaN wins). That is the maximum of (value, index) pairs under a total order: NaNs
// first, then larger values, then smaller indices. A maximum under a total order can be taken in
// any grouping, so the CPU's scan in index order and the GPU's tree pick the same element.
// Whether (b, b_index) comes before (a, a_index) in that order:
template <class T>
EMBER_HOST_DEVICE bool argmax_prefers(T b, int64_t b_index, T a, int64_t a_index) {
  const bool a_nan = is_nan_value(a), b_nan = is_nan_value(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return b > a;
  return b_index < a_index;
}

}  // namespace ember::math
