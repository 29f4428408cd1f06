#include "optim/adam.h"

#include <cmath>

#include "core/ops.h"
#include "optim/state.h"

namespace ember::optim {

void AdamHyperParams::check(const std::string& optimizer) const {
  EMBER_CHECK(beta1_ >= 0.0 && beta1_ < 1.0 && beta2_ >= 0.0 && beta2_ < 1.0, "[", optimizer, "] invalid betas (",
              beta1_, ", ", beta2_, ") (expected 0 <= beta < 1)");
  EMBER_CHECK(std::isfinite(eps_) && eps_ >= 0.0, "[", optimizer, "] invalid eps ", eps_,
              " (expected a finite eps >= 0)");
  EMBER_CHECK(std::isfinite(weight_decay_) && weight_decay_ >= 0.0, "[", optimizer, "] invalid weight_decay ",
              weight_decay_, " (expected a finite weight_decay >= 0)");
}

std::vector<StateSpec> adam_state_specs() {
  return {{"step", StateKind::Counter},
          {"exp_avg", StateKind::LikeParam},
          {"exp_avg_sq", StateKind::LikeParam},
          {"max_exp_avg_sq", StateKind::LikeParam, "amsgrad"}};
}

namespace {

// The step counted, and the moments made on the parameter's first step (undefined v_max without
// amsgrad).
struct AdamState {
  int64_t t;
  Tensor m, v, v_max;
};
AdamState adam_state(const Tensor& p, const AdamHyperParams& o, std::map<std::string, Tensor>& state) {
  const int64_t t = count_step(state);
  return {t, zeros_once(state["exp_avg"], p), zeros_once(state["exp_avg_sq"], p),
          o.amsgrad_ ? zeros_once(state["max_exp_avg_sq"], p) : Tensor()};
}

}  // namespace

// Note [Adam update]
// With gradient g of parameter p at step t (counted per parameter: one skipped while its grad
// was undefined does not advance), as torch.optim.Adam and torch.optim.AdamW compute it:
//   g = g + weight_decay * p                 Adam (coupled): L2 regularisation, part of the moments
//   p = p * (1 - lr * weight_decay)          AdamW (decoupled): not part of the moments
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   v_max = max(v_max, v)                    amsgrad only; then v_max replaces v below
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The bias corrections undo the moments' start at zero; eps is added after the correction, so it
// has the same weight at every step. Coupled decay is divided by sqrt(v) like the gradient, so
// parameters with large gradients are barely decayed; decoupling (Loshchilov & Hutter) shrinks
// every weight by the same factor, which is why AdamW is the usual choice for transformers.
// adam_reference is this, op by op; the fused kernel's rule is AdamUpdate in
// core/kernel_bodies/optimizer_updates.h.
void adam_reference(const Tensor& p, const Tensor& grad, const AdamHyperParams& o, std::map<std::string, Tensor>& state,
                    WeightDecayMode mode) {
  const auto [t, m, v, v_max] = adam_state(p, o, state);
  Tensor g = grad;
  if (o.weight_decay_ != 0.0) {
    if (mode == WeightDecayMode::Coupled) g = g + p * o.weight_decay_;
    else p.mul_(1.0 - o.lr_ * o.weight_decay_);
  }
  m.mul_(o.beta1_);
  m.add_(g, 1.0 - o.beta1_);
  v.mul_(o.beta2_);
  v.add_(g * g, 1.0 - o.beta2_);

  const Tensor* second = &v;
  if (o.amsgrad_) {
    v_max.copy_(maximum(v_max, v));
    second = &v_max;
  }
  const double bias_correction1 = adam_bias_correction(o.beta1_, t);
  const double bias_correction2 = adam_bias_correction(o.beta2_, t);
  const Tensor denom = sqrt(*second) / std::sqrt(bias_correction2) + o.eps_;
  p.add_(m / denom, -o.lr_ / bias_correction1);
}

FusedParam adam_fused(const Tensor& p, const Tensor& grad, const AdamHyperParams& o,
                      std::map<std::string, Tensor>& state) {
  const auto [t, m, v, v_max] = adam_state(p, o, state);
  return {p, grad, {m, v, v_max}, t};
}

AdamRule adam_rule(const AdamHyperParams& o, WeightDecayMode mode) {
  check_enum(mode, WeightDecayMode::Decoupled, "Adam", "WeightDecayMode");
  return {o.lr_, o.beta1_, o.beta2_, o.eps_, o.weight_decay_, o.amsgrad_, mode == WeightDecayMode::Decoupled};
}

Adam::Adam(const std::vector<AdamParamGroup>& groups) : OptimizerWith("Adam", groups, adam_state_specs()) {}

void Adam::step() {
  step_params([](const AdamOptions& o) { return adam_rule(o, WeightDecayMode::Coupled); }, adam_fused,
              [](const Tensor& p, const Tensor& g, const AdamOptions& o, std::map<std::string, Tensor>& state) {
                adam_reference(p, g, o, state, WeightDecayMode::Coupled);
              });
}

}  // namespace ember::optim
