#pragma once
// The softmax and log-softmax row formulas, shared by core/cpu/reduce.cpp and cuda/softmax.cu.
// Each device brings its exp and log (vectorised float math on the CPU, libdevice on the GPU)
// and how it reduces a row; what is computed from those is written here once.
//
// Note [Softmax rows]
// A row of n visible columns (the rest masked, kernels::SoftmaxSpec) is v = scale * x. With
// m = max(v) and e = exp(v - m), every e is in [0, 1], so the sum cannot overflow; it is taken in
// double. Then softmax = e / sum(e) and log_softmax = (v - m) - log(sum(e)): (v - m) is exact, and
// adding m back into the log term would round it away. The masked columns get 0 (log: -inf).
// Backward, with y the forward's output and g the upstream gradient:
//   softmax:     dx = scale * y * (g - sum(g * y))
//   log_softmax: dx = scale * (g - exp(y) * sum(g))
// and 0 in the masked columns.
#include <cmath>

#include "core/kernel_bodies/host_device.h"

namespace ember::softmax_bodies {

// v - m for column x of a row with maximum m (of the scaled row).
template <class T>
EMBER_HOST_DEVICE T shifted(T x, T scale, T max) {
  return x * scale - max;
}

// What the row's sum of e gives the epilogue: 1 / sum and log(sum), in T.
template <class T>
struct Normaliser {
  T inv_sum, log_sum;
};
template <class T>
EMBER_HOST_DEVICE Normaliser<T> normaliser(double sum_exp) {
  return {static_cast<T>(1.0 / sum_exp), static_cast<T>(log(sum_exp))};
}

template <class T>
EMBER_HOST_DEVICE T softmax_value(T e, const Normaliser<T>& n) {
  return e * n.inv_sum;
}
template <class T>
EMBER_HOST_DEVICE T log_softmax_value(T shifted_value, const Normaliser<T>& n) {
  return shifted_value - n.log_sum;
}
template <class T>
EMBER_HOST_DEVICE T masked_value(bool log) {
  return log ? -static_cast<T>(INFINITY) : T(0);
}

// Whether a row whose maximum (of the scaled values) is `max` has no finite value to normalise:
// every value -inf (kernels::SoftmaxSpec::empty_rows_masked).
template <class T>
EMBER_HOST_DEVICE bool all_minus_infinity(T max) {
  return static_cast<double>(max) == -static_cast<double>(INFINITY);
}

// The term the backward sums over a row: g * y, or g for log_softmax.
template <class T>
EMBER_HOST_DEVICE T backward_term(T y, T g, bool log) {
  return log ? g : g * y;
}
template <class T>
EMBER_HOST_DEVICE T softmax_grad(T y, T g, T row_sum, T scale) {
  return scale * (y * (g - row_sum));
}
// exp_y = exp(y), y being log_softmax's output.
template <class T>
EMBER_HOST_DEVICE T log_softmax_grad(T exp_y, T g, T row_sum, T scale) {
  return scale * (g - exp_y * row_sum);
}

}  // namespace ember::softmax_bodies
