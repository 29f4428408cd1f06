#include "optim/rmsprop.h"

#include <cmath>

#include "core/ops.h"
#include "optim/state.h"

namespace ember::optim {

void RMSpropOptions::check(const std::string& optimizer) const {
  EMBER_CHECK(std::isfinite(alpha_) && alpha_ >= 0.0 && alpha_ <= 1.0, "[", optimizer, "] invalid alpha ", alpha_,
              " (expected 0 <= alpha <= 1)");
  EMBER_CHECK(std::isfinite(eps_) && eps_ >= 0.0, "[", optimizer, "] invalid eps ", eps_,
              " (expected a finite eps >= 0)");
  EMBER_CHECK(std::isfinite(weight_decay_) && weight_decay_ >= 0.0, "[", optimizer, "] invalid weight_decay ",
              weight_decay_, " (expected a finite weight_decay >= 0)");
  EMBER_CHECK(std::isfinite(momentum_) && momentum_ >= 0.0, "[", optimizer, "] invalid momentum ", momentum_,
              " (expected a finite momentum >= 0)");
}

RMSprop::RMSprop(const std::vector<RMSpropParamGroup>& groups)
    : OptimizerWith("RMSprop", groups,
                    {{"step", StateKind::Counter},
                     {"square_avg", StateKind::LikeParam},
                     {"momentum_buffer", StateKind::LikeParam, "momentum"},
                     {"grad_avg", StateKind::LikeParam, "centered"}}) {}

namespace {

// The step counted, and the state made on the parameter's first step: square_avg, grad_avg when
// centered, momentum_buffer with momentum (undefined otherwise).
struct RMSpropState {
  Tensor square_avg, grad_avg, momentum_buffer;
};
RMSpropState rmsprop_state(const Tensor& p, const RMSpropOptions& o, std::map<std::string, Tensor>& state) {
  count_step(state);
  return {zeros_once(state["square_avg"], p), o.centered_ ? zeros_once(state["grad_avg"], p) : Tensor(),
          o.momentum_ > 0.0 ? zeros_once(state["momentum_buffer"], p) : Tensor()};
}

// Note [RMSprop update]
// With gradient g of parameter p, as torch.optim.RMSprop computes it:
//   g = g + weight_decay * p                 L2 penalty folded into the gradient
//   v = alpha * v + (1 - alpha) * g * g      a running mean of the squared gradient
//   centered: m = alpha * m + (1 - alpha) * g, and v - m * m (a running variance) replaces v
//   d = sqrt(v) + eps
//   momentum > 0: buf = momentum * buf + g / d, p = p - lr * buf
//   else:         p = p - lr * g / d
// Each coordinate's step is divided by the size of its recent gradients, so the steps have a
// similar size whatever the scale of the gradient. Unlike Adam there is no bias correction:
// v starts at zero, so the first steps are large (1 / sqrt(1 - alpha) = 10 times the lr with the
// default alpha); the momentum buffer, unlike SGD's, starts at zero too. rmsprop_reference is
// this, op by op; the fused kernel's rule is RMSpropUpdate in core/kernel_bodies/optimizer_updates.h.
void rmsprop_reference(const Tensor& p, const Tensor& grad, const RMSpropOptions& o,
                       std::map<std::string, Tensor>& state) {
  const auto [v, m, buf] = rmsprop_state(p, o, state);
  const Tensor g = o.weight_decay_ != 0.0 ? grad + p * o.weight_decay_ : grad;
  v.mul_(o.alpha_);
  v.add_(g * g, 1.0 - o.alpha_);
  Tensor variance = v;
  if (o.centered_) {
    m.mul_(o.alpha_);
    m.add_(g, 1.0 - o.alpha_);
    variance = v - m * m;
  }
  const Tensor denom = sqrt(variance) + o.eps_;
  if (o.momentum_ > 0.0) {
    buf.mul_(o.momentum_);
    buf.add_(g / denom);
    p.add_(buf, -o.lr_);
  } else {
    p.add_(g / denom, -o.lr_);
  }
}

// The state tensors in the kernel's order: the ones in use first (FusedParam::state).
FusedParam rmsprop_fused(const Tensor& p, const Tensor& grad, const RMSpropOptions& o,
                         std::map<std::string, Tensor>& state) {
  const auto [v, m, buf] = rmsprop_state(p, o, state);
  FusedParam f{p, grad, {v}};
  size_t next = 1;
  for (const Tensor& t : {m, buf})
    if (t.defined()) f.state[next++] = t;
  return f;
}

RMSpropRule rmsprop_rule(const RMSpropOptions& o) {
  return {o.lr_, o.alpha_, o.eps_, o.weight_decay_, o.momentum_, o.centered_};
}

}  // namespace

void RMSprop::step() { step_params(rmsprop_rule, rmsprop_fused, rmsprop_reference); }

}  // namespace ember::optim
