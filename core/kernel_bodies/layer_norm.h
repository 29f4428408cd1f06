#pragma once
// Layer normalisation's math over x seen as [rows, cols], shared by core/cpu/layer_norm.cpp and
// cuda/layer_norm.cu: the row statistics from shifted sums and the per-element formulas of both
// directions. Each device brings only how it takes a row's sums (lanes on a CPU thread, a block
// reduction on the GPU) and how it spreads rows and columns over its threads.
//
// Note [Layer-norm statistics]
// Each row's mean and variance are Note [Shifted moments] in core/kernel_bodies/moments.h, with the
// row's x[0] as the shift: one pass over the row in double. They are stored as mean and
// rstd = 1 / sqrt(var + eps), in x's dtype, or in float32 for a 16-bit x (core/ops/layer_norm.cpp).
//
// Note [Layer-norm backward]
// Per row, with xhat = (x - mean) * rstd over its n columns and y = w * xhat + b:
//   dL/dx = rstd * (w g - mean(w g) - xhat * mean(w g xhat)),
// where the two means are the only cross-column terms (they come from differentiating through
// the row's mean and variance). dL/dw = sum over rows of g * xhat and dL/db = sum over rows of g.
#include <cmath>
#include <cstdint>

#include "core/kernel_bodies/host_device.h"
#include "core/kernel_bodies/moments.h"

namespace ember::layer_norm_bodies {

template <class T>
struct RowStatistics {
  T mean, rstd;
};

// The statistics of a row of n elements from sum(d) and sum(d^2).
template <class T>
EMBER_HOST_DEVICE RowStatistics<T> statistics(double shift, double sum, double sum_sq, int64_t n, double eps) {
  const math::Moments m = math::shifted_moments(shift, sum, sum_sq, n);
  return {static_cast<T>(m.mean), static_cast<T>(1.0 / sqrt(m.var + eps))};
}

template <class T>
EMBER_HOST_DEVICE T xhat(T x, RowStatistics<T> s) {
  return (x - s.mean) * s.rstd;
}

// y[j] = w[j] xhat + b[j]; weight and bias may be null (1 and 0).
template <class T>
EMBER_HOST_DEVICE T normalize(T x, RowStatistics<T> s, const T* weight, const T* bias, int64_t j) {
  return xhat(x, s) * (weight ? weight[j] : T(1)) + (bias ? bias[j] : T(0));
}

// w[j] g, in double: the backward's row sums are of this and of it times xhat.
template <class T>
EMBER_HOST_DEVICE double weighted_grad(T g, const T* weight, int64_t j) {
  return static_cast<double>(g) * (weight ? static_cast<double>(weight[j]) : 1.0);
}

// mean(w g) and mean(w g xhat) of a row, from their sums.
template <class T>
struct GradMeans {
  T wg, wg_xhat;
};
template <class T>
EMBER_HOST_DEVICE GradMeans<T> grad_means(double sum_wg, double sum_wg_xhat, int64_t n) {
  return {static_cast<T>(sum_wg / static_cast<double>(n)), static_cast<T>(sum_wg_xhat / static_cast<double>(n))};
}

// dL/dx[j] of Note [Layer-norm backward].
template <class T>
EMBER_HOST_DEVICE T grad_x(T g, T x, RowStatistics<T> s, const T* weight, int64_t j, GradMeans<T> m) {
  return s.rstd * ((weight ? weight[j] : T(1)) * g - m.wg - xhat(x, s) * m.wg_xhat);
}

// What element (row, j) adds to dL/dw[j] and to dL/db[j].
template <class T>
EMBER_HOST_DEVICE double weight_grad_term(T g, T x, RowStatistics<T> s) {
  return static_cast<double>(g * xhat(x, s));
}
template <class T>
EMBER_HOST_DEVICE double bias_grad_term(T g) {
  return static_cast<double>(g);
}

}  // namespace ember::layer_norm_bodies
