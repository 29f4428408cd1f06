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
                     {"momentum_buffer", StateKind::LikeParam},
                     {"grad_avg", StateKind::LikeParam}}) {}

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
// default alpha); the momentum buffer, unlike SGD's, starts at zero too.
void RMSprop::step() {
  for_each_param_with_grad([](const Tensor& p, const Tensor& grad, const RMSpropOptions& o, ParamState& state) {
    count_step(state);
    const Tensor g = o.weight_decay_ != 0.0 ? grad + p * o.weight_decay_ : grad;
    const Tensor& v = zeros_once(state["square_avg"], p);
    v.mul_(o.alpha_);
    v.add_(g * g, 1.0 - o.alpha_);
    Tensor variance = v;
    if (o.centered_) {
      const Tensor& m = zeros_once(state["grad_avg"], p);
      m.mul_(o.alpha_);
      m.add_(g, 1.0 - o.alpha_);
      variance = v - m * m;
    }
    const Tensor denom = sqrt(variance) + o.eps_;
    if (o.momentum_ > 0.0) {
      const Tensor& buf = zeros_once(state["momentum_buffer"], p);
      buf.mul_(o.momentum_);
      buf.add_(g / denom);
      p.add_(buf, -o.lr_);
    } else {
      p.add_(g / denom, -o.lr_);
    }
  });
}

}  // namespace ember::optim
