#pragma once
// The fused softmax cross-entropy's formulas, shared by core/cpu/reduce.cpp and
// cuda/cross_entropy.cu. Each device brings its exp and log and how it reduces a row.
//
// Note [Cross-entropy with label smoothing]
// For logits x of a row with C classes and target t, the smoothed target is
// q = (1 - s) onehot(t) + s / C, and log p_j = x_j - lse with lse = max + log(sum exp(x - max)).
// The loss -sum_j q_j log p_j is then
//   lse - (1 - s) x_t - (s / C) sum_j x_j,
// and its gradient g (p_j - s / C) - g (1 - s) [j == t]. A row whose target is ignore_index has
// loss 0 and gradient 0. The forward keeps lse per row, so the backward needs one exp per element
// (why the whole loss is one op: Note [Fused cross-entropy] in core/ops/loss.cpp).
#include <cmath>
#include <cstdint>

#include "core/kernel_bodies/host_device.h"

namespace ember::cross_entropy_bodies {

// lse from the row's maximum and sum of exp(x - max).
EMBER_HOST_DEVICE double log_sum_exp(double max, double sum_exp) { return max + log(sum_exp); }

// row_sum = sum_j x_j, needed only when smoothing > 0.
EMBER_HOST_DEVICE double loss(double lse, double x_target, double row_sum, double smoothing, int64_t classes) {
  return lse - (1.0 - smoothing) * x_target - smoothing / static_cast<double>(classes) * row_sum;
}

// s / C, subtracted from every probability, and 1 - s, subtracted at the target.
template <class T>
struct GradWeights {
  T uniform, on_target;
};
template <class T>
EMBER_HOST_DEVICE GradWeights<T> grad_weights(double smoothing, int64_t classes) {
  return {static_cast<T>(smoothing / static_cast<double>(classes)), static_cast<T>(1.0 - smoothing)};
}

// dL/dx_j for p = exp(x_j - lse), with the target's extra term when j == t.
template <class T>
EMBER_HOST_DEVICE T grad(T g, T p, const GradWeights<T>& w) {
  return g * (p - w.uniform);
}
template <class T>
EMBER_HOST_DEVICE T target_term(T g, const GradWeights<T>& w) {
  return g * w.on_target;
}

}  // namespace ember::cross_entropy_bodies
