// Binary cross-entropy on probabilities and on logits. Each is an autograd Function whose
// forward and backward are written with other ops (so they run on every device): composing the
// forward alone would give other gradients than PyTorch's where the logs are clamped (BCE) and
// would differentiate softplus through abs() and relu() at x = 0 (BCE with logits).
#include <cmath>

#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/loss_helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

constexpr double kLogFloor = -100.0;

Tensor clamped_log(const Tensor& x) { return clamp_min(log(x), kLogFloor); }

// Note [Binary cross-entropy]
// loss = -(t log(x) + (1 - t) log(1 - x)). At x = 0 or 1 one log is -inf; PyTorch clamps each at
// -100, so a confidently wrong prediction costs 100 instead of inf. The derivative of the
// clamped form would be 0 there (and NaN from 0 * inf through log's backward), so the backward
// is the unclamped derivative with its denominator kept away from zero, as PyTorch's:
//   d/dx = (x - t) / max(x (1 - x), 1e-12)        d/dt = log(1 - x) - log(x)
// and the target's slope is unclamped too, as PyTorch's: +-inf at x = 0 or 1.
struct BinaryCrossEntropy : Function<BinaryCrossEntropy> {
  static constexpr const char* name = "binary_cross_entropy";
  struct State {
    autograd::SavedRef input, target;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Tensor& t) {
    s = {c.save(x), c.save(t)};
    return -(t * clamped_log(x) + (1.0 - t) * clamped_log(1.0 - x));
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const Tensor x = c.get(s.input), t = c.get(s.target);
    Tensor gx, gt;
    if (c.needs_input_grad(0)) gx = g * (x - t) / clamp_min(x * (1.0 - x), 1e-12);
    if (c.needs_input_grad(1)) gt = g * (log(1.0 - x) - log(x));
    return {gx, gt};
  }
};

// Note [Binary cross-entropy with logits]
// With p = sigmoid(x), -log(p) = softplus(-x) and -log(1 - p) = x + softplus(-x), so
//   loss = (1 - t) x + w_pos softplus(-x),   w_pos = 1 + (pos_weight - 1) t,
// never forming p, whose log would underflow for large |x|. softplus(-x) = log(1 + exp(-x)) is
// evaluated as max(-x, 0) + log(1 + exp(-|x|)): exp only ever sees a value <= 0, so it cannot
// overflow (the same rewriting as PyTorch's, which keeps its rounding). The derivatives:
//   d/dx = w_pos sigmoid(x) - pos_weight t      d/dt = (pos_weight - 1) softplus(-x) - x
//   d/dpos_weight = t softplus(-x)              (returned in input's shape; Note [Gradient shapes])
struct BinaryCrossEntropyWithLogits : Function<BinaryCrossEntropyWithLogits> {
  static constexpr const char* name = "binary_cross_entropy_with_logits";
  struct State {
    autograd::SavedRef input, target;
    std::optional<autograd::SavedRef> pos_weight;  // when given
  };
  static Tensor softplus_neg(const Tensor& x) { return relu(-x) + log(1.0 + exp(-abs(x))); }
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Tensor& t, const Tensor& pos_weight) {
    s.input = c.save(x);
    s.target = c.save(t);
    if (pos_weight.defined()) s.pos_weight = c.save(pos_weight);
    const Tensor w_pos = pos_weight.defined() ? 1.0 + (pos_weight - 1.0) * t : Tensor();
    const Tensor sp = softplus_neg(x);
    return (1.0 - t) * x + (w_pos.defined() ? w_pos * sp : sp);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const Tensor x = c.get(s.input), t = c.get(s.target), pos_weight = c.get(s.pos_weight);
    const bool has_pos_weight = s.pos_weight.has_value();
    Tensor gx, gt, gp;
    if (c.needs_input_grad(0))
      gx = g * (has_pos_weight ? (1.0 + (pos_weight - 1.0) * t) * sigmoid(x) - pos_weight * t : sigmoid(x) - t);
    if (c.needs_input_grad(1)) gt = g * (has_pos_weight ? (pos_weight - 1.0) * softplus_neg(x) - x : -x);
    if (has_pos_weight && c.needs_input_grad(2)) gp = g * t * softplus_neg(x);
    return {gx, gt, gp};
  }
};

double count(const Tensor& input) { return static_cast<double>(input.numel()); }

Tensor weighted(const Tensor& losses, const Tensor& weight) { return weight.defined() ? losses * weight : losses; }

}  // namespace

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction, const Tensor& weight) {
  ops::check_reduction(reduction, "binary_cross_entropy");
  if (autocast::OpCast cast{"binary_cross_entropy", input})
    return binary_cross_entropy(cast(input), cast(target), reduction, cast(weight));
  ops::check_loss_pair(input, target, "binary_cross_entropy");
  ops::check_loss_weight(weight, input, "binary_cross_entropy", "weight");
  if (input.numel() > 0) {
    // Two reductions on the input's device and two scalars back, not a copy of the whole input; a
    // NaN anywhere makes both extremes NaN (the reductions propagate it), and fails the check.
    const double lo = min(input).item(), hi = max(input).item();
    const double worst = hi > 1.0 || std::isnan(hi) ? hi : lo;
    EMBER_CHECK(lo >= 0.0 && hi <= 1.0, "[binary_cross_entropy] expects input probabilities in [0, 1], got ", worst,
                " in input of shape ", shape_str(input.shape()), " (for logits use binary_cross_entropy_with_logits)");
  }
  const Tensor losses = weighted(BinaryCrossEntropy::apply(input, target), weight);
  return ops::reduce_loss(losses, reduction, count(input));
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, Reduction reduction,
                                        const Tensor& weight, const Tensor& pos_weight) {
  ops::check_reduction(reduction, "binary_cross_entropy_with_logits");
  const char* op = "binary_cross_entropy_with_logits";
  if (autocast::OpCast cast{op, input})
    return binary_cross_entropy_with_logits(cast(input), cast(target), reduction, cast(weight), cast(pos_weight));
  ops::check_loss_pair(input, target, op);
  ops::check_loss_weight(weight, input, op, "weight");
  ops::check_loss_weight(pos_weight, input, op, "pos_weight");
  const Tensor losses = weighted(BinaryCrossEntropyWithLogits::apply(input, target, pos_weight), weight);
  return ops::reduce_loss(losses, reduction, count(input));
}

}  // namespace ember
