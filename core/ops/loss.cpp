// The losses over class indices: cross_entropy (fused softmax + negative log-likelihood) and
// nll_loss. The elementwise losses are in regression_loss.cpp and binary_cross_entropy.cpp.
#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"
#include "core/ops/loss_helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// Note [Fused cross-entropy]
// loss_n = logsumexp(x_n) - sum_c q_nc x_nc, with q the (smoothed) target distribution.
// Computing it in one kernel keeps it stable (the max is subtracted inside logsumexp) and the
// backward needs only the logits and one logsumexp per sample: softmax = exp(x - lse) is
// recomputed instead of keeping an [N, C] probability tensor alive until backward.
struct CrossEntropy : Function<CrossEntropy> {
  static constexpr const char* name = "cross_entropy";
  struct State {
    int64_t ignore_index;
    double label_smoothing;
    autograd::SavedRef logits, target, logsumexp;  // contiguous; one logsumexp per row
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& logits, const Tensor& target, int64_t ignore_index,
                        double smoothing) {
    Tensor x = logits.contiguous(), t = target.contiguous();
    const int64_t n = x.size(0);
    Tensor loss = ops::empty_on({n}, x.dtype(), x.device()), lse = ops::empty_on({n}, x.dtype(), x.device());
    if (n > 0) kernels::cross_entropy_forward[x.device()](x, t, ignore_index, smoothing, loss, lse);
    s = {ignore_index, smoothing, c.save(x), c.save(t), c.save(lse)};
    return loss;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor x = c.get(s.logits);
    Tensor gx = ops::empty_on(x.shape(), x.dtype(), x.device());
    if (gx.numel() > 0)
      kernels::cross_entropy_backward[x.device()](x, c.get(s.target), c.get(s.logsumexp), g.contiguous(), s.ignore_index,
                                                  s.label_smoothing, gx);
    return {gx, Tensor()};
  }
};

}  // namespace

namespace {

// The fused kernel's case: logits [N, C], int64 targets [N], no class weights.
Tensor fused_cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, int64_t ignore_index,
                           double label_smoothing) {
  if (!target.device().is_cpu()) {
    // The kernel checks the targets where it reads them and a bad one is raised at the next
    // synchronisation (Note [Index errors found on the device] in cuda/bad_index.h); the mean's
    // divisor is counted on the device too, so nothing waits for it.
    Tensor losses = CrossEntropy::apply(logits, target, ignore_index, label_smoothing);
    if (reduction != Reduction::Mean) return ops::reduce_loss(losses, reduction, 1.0);
    return sum(losses) / sum((target != static_cast<double>(ignore_index)).to(logits.dtype()));
  }
  const int64_t classes = logits.size(1);
  int64_t counted = 0;
  for (int64_t t : target.to_vector<int64_t>()) {
    if (t == ignore_index) continue;
    EMBER_CHECK(t >= 0 && t < classes, "[cross_entropy] target ", t, " is out of range for ", classes, " classes");
    ++counted;
  }
  Tensor losses = CrossEntropy::apply(logits, target, ignore_index, label_smoothing);
  return ops::reduce_loss(losses, reduction, static_cast<double>(counted));
}

// The targets with the ignored ones as class 0, so that gather and index_select stay in range
// (Note [nll_loss from gather]); on CUDA the kernel also checks the others.
Tensor safe_targets(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  const Tensor safe = ops::empty_on(targets.shape(), kInt64, targets.device());
  kernels::class_targets[targets.device()](targets.contiguous(), classes, ignore_index, safe);
  return safe;
}

// Each target's class weight, 0 for an ignored one: summed, a weighted mean's divisor.
Tensor target_weights(const Tensor& weight, const Tensor& safe, const Tensor& ignored) {
  return masked_fill(index_select(weight, 0, safe.flatten()).reshape(safe.shape()), ignored, 0.0);
}

// The class weights shaped to broadcast along dim 1 of a [N, C, d1, ...] tensor.
Tensor along_classes(const Tensor& weight, int64_t dims) {
  Shape shape(static_cast<size_t>(dims), 1);
  shape[1] = weight.numel();
  return weight.reshape(shape);
}

// Note [Cross-entropy beyond the fused kernel]
// The fused kernel (Note [Fused cross-entropy]) covers logits [N, C] with class indices and no
// class weights. The rest of PyTorch's cross_entropy is composed from log_softmax over dim 1:
//   indices into [N, C, d1, ...] logits: the fused kernel on the logits with the classes last,
//     [N * d1 * ..., C], the losses shaped back as the target;
//   class weights w: nll_loss's weighted loss (its mean divides by the summed weights of the
//     counted targets); with label smoothing e, (1 - e) times that plus e / C times the smoothing
//     term -sum_c w_c log p_c per target (0 where ignored), reduced the same way;
//   class probabilities q (a floating target shaped as the logits): -sum_c w_c q_c log p_c per
//     sample, with q smoothed to (1 - e) q + e / C; the mean divides by the number of samples,
//     N * d1 * ..., and ignore_index does not apply.
// These are PyTorch's definitions; a test checks each against values from PyTorch.
Tensor weighted_cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, int64_t ignore_index,
                              double label_smoothing, const Tensor& weight) {
  const Tensor log_p = log_softmax(logits, 1);
  if (label_smoothing == 0.0) return nll_loss(log_p, target, reduction, ignore_index, weight);
  // Per target, both terms 0 where ignored; then reduced once, the mean divided as nll_loss's is.
  const Tensor ignored = target == static_cast<double>(ignore_index);
  const Tensor smooth = masked_fill(-sum(log_p * along_classes(weight, logits.dim()), {1}), ignored, 0.0);
  const Tensor losses = nll_loss(log_p, target, Reduction::None, ignore_index, weight) * (1.0 - label_smoothing) +
                        smooth * (label_smoothing / static_cast<double>(logits.size(1)));
  if (reduction == Reduction::None) return losses;
  if (reduction == Reduction::Sum) return sum(losses);
  return sum(losses) / sum(target_weights(weight, safe_targets(target, logits.size(1), ignore_index), ignored));
}

Tensor probability_cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction,
                                 double label_smoothing, const Tensor& weight) {
  const double classes = static_cast<double>(logits.size(1));
  Tensor q = label_smoothing > 0.0 ? target * (1.0 - label_smoothing) + label_smoothing / classes : target;
  if (weight.defined()) q = q * along_classes(weight, logits.dim());
  const Tensor losses = -sum(log_softmax(logits, 1) * q, {1});
  return ops::reduce_loss(losses, reduction, static_cast<double>(losses.numel()));
}

void check_class_weight(const Tensor& weight, const Tensor& logits) {
  if (!weight.defined()) return;
  EMBER_CHECK(weight.shape() == Shape{logits.size(1)}, "[cross_entropy] weight of shape ", shape_str(weight.shape()),
              " must hold one weight per class, [", logits.size(1), "] for logits of shape ",
              shape_str(logits.shape()));
  EMBER_CHECK(weight.dtype() == logits.dtype(), "[cross_entropy] logits are ", logits.dtype(), " but weight is ",
              weight.dtype());
  ops::check_same_device(logits, weight, "cross_entropy");
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, int64_t ignore_index,
                     double label_smoothing, const Tensor& weight) {
  ops::check_reduction(reduction, "cross_entropy");
  if (autocast::OpCast cast{"cross_entropy", logits})
    return cross_entropy(cast(logits), cast(target), reduction, ignore_index, label_smoothing, cast(weight));
  ops::check_defined(logits, "cross_entropy", "logits");
  ops::check_defined(target, "cross_entropy", "target");
  ops::check_floating(logits, "cross_entropy");
  EMBER_CHECK(logits.dim() >= 1, "[cross_entropy] expects logits of shape [C], [N, C] or [N, C, d1, ...], got ",
              shape_str(logits.shape()));
  ops::check_same_device(logits, target, "cross_entropy");
  EMBER_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "[cross_entropy] label_smoothing must be in [0, 1], got ",
              label_smoothing);
  if (logits.dim() == 1) {  // one sample: a batch of one
    EMBER_CHECK(target.dim() == (is_floating(target.dtype()) ? 1 : 0), "[cross_entropy] the logits of one sample, ",
                shape_str(logits.shape()), ", take a 0-d class index or class probabilities of shape ",
                shape_str(logits.shape()), " as target; got a ", target.dtype(), " target of shape ",
                shape_str(target.shape()));
    const Tensor loss = cross_entropy(logits.unsqueeze(0), target.unsqueeze(0), reduction, ignore_index,
                                      label_smoothing, weight);
    return reduction == Reduction::None ? loss.squeeze(0) : loss;
  }
  check_class_weight(weight, logits);
  if (is_floating(target.dtype())) {
    EMBER_CHECK(target.shape() == logits.shape() && target.dtype() == logits.dtype(),
                "[cross_entropy] class probabilities as target must have the logits' shape and dtype, ",
                shape_str(logits.shape()), " ", logits.dtype(), "; got ", shape_str(target.shape()), " ",
                target.dtype());
    return probability_cross_entropy(logits, target, reduction, label_smoothing, weight);
  }
  EMBER_CHECK(target.dtype() == kInt64, "[cross_entropy] expects int64 class indices or floating class "
              "probabilities as target, got ", target.dtype(), " of shape ", shape_str(target.shape()));
  Shape expected = logits.shape();
  expected.erase(expected.begin() + 1);
  EMBER_CHECK(target.shape() == expected, "[cross_entropy] target of shape ", shape_str(target.shape()),
              " does not match logits of shape ", shape_str(logits.shape()), " (expected ", shape_str(expected), ")");
  if (weight.defined()) return weighted_cross_entropy(logits, target, reduction, ignore_index, label_smoothing, weight);
  if (logits.dim() == 2) return fused_cross_entropy(logits, target, reduction, ignore_index, label_smoothing);
  Shape classes_last(static_cast<size_t>(logits.dim()));
  classes_last[0] = 0;
  for (int64_t d = 2; d < logits.dim(); ++d) classes_last[static_cast<size_t>(d - 1)] = d;
  classes_last.back() = 1;
  const Tensor loss = fused_cross_entropy(logits.permute(classes_last).reshape({-1, logits.size(1)}),
                                          target.reshape({-1}), reduction, ignore_index, label_smoothing);
  return reduction == Reduction::None ? loss.reshape(target.shape()) : loss;
}

// Note [nll_loss from gather]
// nll_loss is composed of differentiable ops, so it runs and differentiates on every device:
// the log-probability of each target class is picked with gather along dim 1. An ignored target
// (ignore_index, often -100) is no class, so the class_targets kernel first replaces it by class
// 0 to keep gather in range, and its loss is then overwritten with 0 by masked_fill; masked_fill
// sends no gradient to the elements it overwrote, so the stand-in class gets none either. The CPU
// checks the other targets before; on CUDA the kernel checks them where it reads them, and the
// mean counts the targets on the device, as cross_entropy does, so nothing waits for the device
// (Note [Index errors found on the device] in cuda/bad_index.h). With class weights the mean
// divides by the summed weights of the counted targets, not by their number (PyTorch's weighted
// mean), so a batch of one heavy class and one light class is not averaged as equals.
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index,
                const Tensor& weight) {
  ops::check_reduction(reduction, "nll_loss");
  if (autocast::OpCast cast{"nll_loss", input}) return nll_loss(cast(input), target, reduction, ignore_index, cast(weight));
  ops::check_defined(input, "nll_loss");
  ops::check_defined(target, "nll_loss", "target");
  EMBER_CHECK(input.dim() >= 2, "[nll_loss] expects input of shape [N, C] or [N, C, d1, ...], got ",
              shape_str(input.shape()));
  ops::check_floating(input, "nll_loss");
  EMBER_CHECK(target.dtype() == kInt64, "[nll_loss] expects int64 class indices as target, got ", target.dtype(),
              " of shape ", shape_str(target.shape()));
  Shape expected = input.shape();
  expected.erase(expected.begin() + 1);
  EMBER_CHECK(target.shape() == expected, "[nll_loss] target of shape ", shape_str(target.shape()),
              " does not match input of shape ", shape_str(input.shape()), " (expected ", shape_str(expected), ")");
  ops::check_same_device(input, target, "nll_loss");
  const int64_t classes = input.size(1);
  if (weight.defined()) {
    EMBER_CHECK(weight.shape() == Shape{classes}, "[nll_loss] weight of shape ", shape_str(weight.shape()),
                " must hold one weight per class, [", classes, "] for input of shape ", shape_str(input.shape()));
    EMBER_CHECK(weight.dtype() == input.dtype(), "[nll_loss] input is ", input.dtype(), " but weight is ",
                weight.dtype());
    ops::check_same_device(input, weight, "nll_loss");
  }
  const Tensor targets = target.contiguous();
  double counted = 0;
  if (targets.device().is_cpu()) {
    for (int64_t t : targets.to_vector<int64_t>()) {
      if (t == ignore_index) continue;
      EMBER_CHECK(t >= 0 && t < classes, "[nll_loss] target ", t, " is out of range for ", classes, " classes");
      ++counted;
    }
  }
  const Tensor safe = safe_targets(targets, classes, ignore_index);
  const Tensor ignored = target == static_cast<double>(ignore_index);
  const Tensor picked = gather(input, 1, safe.unsqueeze(1)).squeeze(1);
  const Tensor class_weight = weight.defined() ? target_weights(weight, safe, ignored) : Tensor();
  const Tensor losses = masked_fill(class_weight.defined() ? -(picked * class_weight) : -picked, ignored, 0.0);
  if (reduction != Reduction::Mean || (!weight.defined() && targets.device().is_cpu()))
    return ops::reduce_loss(losses, reduction, counted);
  if (weight.defined()) return sum(losses) / sum(class_weight);
  return sum(losses) / sum((target != static_cast<double>(ignore_index)).to(input.dtype()));  // counted on the device
}

}  // namespace ember
