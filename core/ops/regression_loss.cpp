// The elementwise regression losses: mse_loss, l1_loss, smooth_l1_loss and huber_loss. Each is
// composed of differentiable ops, so it runs and differentiates on every device; their
// gradients are the ones PyTorch's fused kernels compute (the sign of d for l1, 0 where d = 0).
#include <cmath>

#include "core/autocast.h"
#include "core/ops.h"
#include "core/ops/loss_helpers.h"

namespace ember {

namespace {

// Note [Smooth L1 and Huber]
// Both are quadratic for |d| < threshold and linear beyond, joined so that value and slope are
// continuous at the threshold; they differ only by a factor. where() picks the branch, and sends
// each element's gradient only into the branch it took, so the slope is d / beta inside and
// sign(d) (times delta) outside, as PyTorch. The outer branch is also taken at |d| = threshold,
// where both give the same value and slope. The quadratic branch squares d clamped to the
// threshold, which changes nothing where it is taken; where it is not, an infinite d would give
// that branch the slope 0 * inf = NaN, and where() would add it to the other's.
Tensor quadratic_then_linear(const Tensor& input, const Tensor& target, double threshold, double quadratic_scale,
                             double linear_scale) {
  const Tensor d = input - target;
  const Tensor magnitude = abs(d);
  const Tensor inside = clamp(d, -threshold, threshold);
  const Tensor quadratic = inside * inside * quadratic_scale;
  const Tensor linear = (magnitude - 0.5 * threshold) * linear_scale;
  return where(magnitude < threshold, quadratic, linear);
}

double count(const Tensor& input) { return static_cast<double>(input.numel()); }

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  ops::check_reduction(reduction, "mse_loss");
  if (autocast::OpCast cast{"mse_loss", input}) return mse_loss(cast(input), cast(target), reduction);
  ops::check_loss_pair(input, target, "mse_loss");
  const Tensor d = input - target;
  return ops::reduce_loss(d * d, reduction, count(input));
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  ops::check_reduction(reduction, "l1_loss");
  if (autocast::OpCast cast{"l1_loss", input}) return l1_loss(cast(input), cast(target), reduction);
  ops::check_loss_pair(input, target, "l1_loss");
  return ops::reduce_loss(abs(input - target), reduction, count(input));
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  ops::check_reduction(reduction, "smooth_l1_loss");
  if (autocast::OpCast cast{"smooth_l1_loss", input}) return smooth_l1_loss(cast(input), cast(target), reduction, beta);
  ops::check_loss_pair(input, target, "smooth_l1_loss");
  EMBER_CHECK(std::isfinite(beta) && beta >= 0.0, "[smooth_l1_loss] beta must be finite and >= 0, got ", beta);
  // The quadratic part would divide by zero; with beta = 0 the loss is |d| everywhere.
  if (beta == 0.0) return l1_loss(input, target, reduction);
  return ops::reduce_loss(quadratic_then_linear(input, target, beta, 0.5 / beta, 1.0), reduction, count(input));
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  ops::check_reduction(reduction, "huber_loss");
  if (autocast::OpCast cast{"huber_loss", input}) return huber_loss(cast(input), cast(target), reduction, delta);
  ops::check_loss_pair(input, target, "huber_loss");
  EMBER_CHECK(std::isfinite(delta) && delta > 0.0, "[huber_loss] delta must be finite and > 0, got ", delta);
  return ops::reduce_loss(quadratic_then_linear(input, target, delta, 0.5, delta), reduction, count(input));
}

}  // namespace ember
