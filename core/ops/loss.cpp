// Losses: cross_entropy (fused softmax + negative log-likelihood) and mse_loss.
#include <algorithm>

#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

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
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& logits, const Tensor& target, int64_t ignore_index,
                        double smoothing) {
    Tensor x = logits.contiguous(), t = target.contiguous();
    const int64_t n = x.size(0);
    Tensor loss = ops::empty_on({n}, x.dtype(), x.device()), lse = ops::empty_on({n}, x.dtype(), x.device());
    if (n > 0) kernels::cross_entropy_forward[x.device()](x, t, ignore_index, smoothing, loss, lse);
    c.save(x);
    c.save(t);
    c.save(lse);
    s = {ignore_index, smoothing};
    return loss;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor x = c.saved(0);
    Tensor gx = ops::empty_on(x.shape(), x.dtype(), x.device());
    if (gx.numel() > 0)
      kernels::cross_entropy_backward[x.device()](x, c.saved(1), c.saved(2), g.contiguous(), s.ignore_index,
                                                  s.label_smoothing, gx);
    return {gx, Tensor()};
  }
};

Tensor reduce_loss(const Tensor& losses, Reduction reduction, double count) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: return sum(losses) / count;
  }
  return losses;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, int64_t ignore_index,
                     double label_smoothing) {
  ops::check_defined(logits, "cross_entropy", "logits");
  ops::check_defined(target, "cross_entropy", "target");
  EMBER_CHECK(logits.dim() == 2, "[cross_entropy] expects logits of shape [N, C], got ", shape_str(logits.shape()));
  ops::check_floating(logits, "cross_entropy");
  EMBER_CHECK(target.dtype() == kInt64, "[cross_entropy] expects int64 class indices as target, got ", target.dtype(),
              " of shape ", shape_str(target.shape()));
  EMBER_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), "[cross_entropy] target of shape ",
              shape_str(target.shape()), " does not match logits of shape ", shape_str(logits.shape()),
              " (expected [", logits.size(0), "])");
  ops::check_same_device(logits, target, "cross_entropy");
  EMBER_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, "[cross_entropy] label_smoothing must be in [0, 1], got ",
              label_smoothing);
  const int64_t classes = logits.size(1);
  int64_t counted = 0;
  for (int64_t t : target.to_vector<int64_t>()) {
    if (t == ignore_index) continue;
    EMBER_CHECK(t >= 0 && t < classes, "[cross_entropy] target ", t, " is out of range for ", classes, " classes");
    ++counted;
  }
  Tensor losses = CrossEntropy::apply(logits, target, ignore_index, label_smoothing);
  return reduce_loss(losses, reduction, static_cast<double>(counted));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  ops::check_defined(input, "mse_loss");
  ops::check_defined(target, "mse_loss", "target");
  EMBER_CHECK(input.shape() == target.shape(), "[mse_loss] input of shape ", shape_str(input.shape()),
              " and target of shape ", shape_str(target.shape()), " differ");
  Tensor diff = input - target;
  return reduce_loss(diff * diff, reduction, static_cast<double>(input.numel()));
}

}  // namespace ember
