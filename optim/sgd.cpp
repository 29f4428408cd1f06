#include "optim/sgd.h"

#include <cmath>

#include "core/ops.h"
#include "optim/state.h"

namespace ember::optim {

void SGDOptions::check(const std::string& optimizer) const {
  EMBER_CHECK(std::isfinite(momentum_) && momentum_ >= 0.0, "[", optimizer, "] invalid momentum ", momentum_,
              " (expected a finite momentum >= 0)");
  EMBER_CHECK(std::isfinite(dampening_), "[", optimizer, "] invalid dampening ", dampening_, " (expected a finite value)");
  EMBER_CHECK(std::isfinite(weight_decay_) && weight_decay_ >= 0.0, "[", optimizer, "] invalid weight_decay ",
              weight_decay_, " (expected a finite weight_decay >= 0)");
  // Nesterov's look-ahead is defined on an undamped momentum buffer.
  EMBER_CHECK(!nesterov_ || (momentum_ > 0.0 && dampening_ == 0.0), "[", optimizer,
              "] nesterov momentum requires momentum > 0 and dampening == 0 (got momentum ", momentum_,
              ", dampening ", dampening_, ")");
}

SGD::SGD(const std::vector<SGDParamGroup>& groups)
    : OptimizerWith("SGD", groups, {{"momentum_buffer", StateKind::LikeParam, "momentum"}}) {}

namespace {

// Note [SGD update]
// With gradient g of parameter p, as torch.optim.SGD computes it:
//   g = maximize ? -g : g            the sign flips first, so weight decay still pulls p to 0
//   g = g + weight_decay * p         L2 penalty folded into the gradient
//   if momentum != 0:
//     buf = first step ? g : momentum * buf + (1 - dampening) * g
//     g = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
// The buffer starts as a copy of the first gradient, not zeros, so the first step is a plain
// SGD step rather than one damped by (1 - dampening). sgd_reference is this, op by op; the fused
// kernel's rule is SgdUpdate in core/kernel_bodies/optimizer_updates.h.
void sgd_reference(const Tensor& p, const Tensor& grad, const SGDOptions& o, std::map<std::string, Tensor>& state) {
  Tensor g = o.maximize_ ? -grad : grad;
  if (o.weight_decay_ != 0.0) g = g + p * o.weight_decay_;
  if (o.momentum_ != 0.0) {
    Tensor& buf = state["momentum_buffer"];
    if (!buf.defined()) {
      buf = g.clone();
    } else {
      buf.mul_(o.momentum_);
      buf.add_(g, 1.0 - o.dampening_);
    }
    g = o.nesterov_ ? g + buf * o.momentum_ : buf;
  }
  p.add_(g, -o.lr_);
}

FusedParam sgd_fused(const Tensor& p, const Tensor& grad, const SGDOptions& o, std::map<std::string, Tensor>& state) {
  FusedParam f{p, grad, {}};
  if (o.momentum_ != 0.0) {
    Tensor& buf = state["momentum_buffer"];
    f.state_is_new = !buf.defined();
    f.state[0] = zeros_once(buf, p);  // a new buffer: the kernel sets it to the gradient
  }
  return f;
}

SgdRule sgd_rule(const SGDOptions& o) {
  return {o.lr_, o.momentum_, o.dampening_, o.weight_decay_, o.nesterov_, o.maximize_};
}

}  // namespace

void SGD::step() { step_params(sgd_rule, sgd_fused, sgd_reference); }

}  // namespace ember::optim
