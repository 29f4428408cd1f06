#include "optim/adagrad.h"

#include <cmath>

#include "core/ops.h"
#include "optim/state.h"

namespace ember::optim {

void AdagradOptions::check(const std::string& optimizer) const {
  const auto finite_non_negative = [&](const char* name, double value) {
    EMBER_CHECK(std::isfinite(value) && value >= 0.0, "[", optimizer, "] invalid ", name, " ", value,
                " (expected a finite ", name, " >= 0)");
  };
  finite_non_negative("lr_decay", lr_decay_);
  finite_non_negative("weight_decay", weight_decay_);
  finite_non_negative("initial_accumulator_value", initial_accumulator_value_);
  finite_non_negative("eps", eps_);
}

Adagrad::Adagrad(const std::vector<AdagradParamGroup>& groups)
    : OptimizerWith("Adagrad", groups, {{"step", StateKind::Counter}, {"sum", StateKind::LikeParam}}) {}

namespace {

// Note [Adagrad update]
// With gradient g of parameter p at step t, as torch.optim.Adagrad computes it:
//   g = g + weight_decay * p                 L2 penalty folded into the gradient
//   sum = sum + g * g                        every squared gradient so far (starts at
//                                            initial_accumulator_value)
//   p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)
// A coordinate that has seen large gradients takes small steps from then on, one that rarely
// gets a gradient keeps large ones (the point of Adagrad for sparse features). The sum only
// grows, so every step size shrinks over time; RMSprop replaces it with a running mean.
// torch creates `sum` when the optimizer is built; ember on the parameter's first step, with
// the same value, so the steps are the same. adagrad_reference is this, op by op; the fused
// kernel's rule is AdagradUpdate in core/kernel_bodies/optimizer_updates.h.
void adagrad_reference(const Tensor& p, const Tensor& grad, const AdagradOptions& o,
                       std::map<std::string, Tensor>& state) {
  const int64_t t = count_step(state);
  const Tensor g = o.weight_decay_ != 0.0 ? grad + p * o.weight_decay_ : grad;
  const Tensor& sum = full_once(state["sum"], p, o.initial_accumulator_value_);
  sum.add_(g * g);
  p.add_(g / (sqrt(sum) + o.eps_), -adagrad_lr(o.lr_, o.lr_decay_, t));
}

FusedParam adagrad_fused(const Tensor& p, const Tensor& grad, const AdagradOptions& o,
                         std::map<std::string, Tensor>& state) {
  const int64_t t = count_step(state);
  return {p, grad, {full_once(state["sum"], p, o.initial_accumulator_value_)}, t};
}

AdagradRule adagrad_rule(const AdagradOptions& o) { return {o.lr_, o.lr_decay_, o.weight_decay_, o.eps_}; }

}  // namespace

void Adagrad::step() { step_params(adagrad_rule, adagrad_fused, adagrad_reference); }

}  // namespace ember::optim
