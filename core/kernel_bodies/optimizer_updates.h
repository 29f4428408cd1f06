#pragma once
// The update rules of the fused optimizer step as per-element functions, written once for
// core/cpu/optimizer_step.cpp and cuda/optimizer_step.cu (Note [Multi-tensor optimizer updates]
// in core/optimizer_step.h), and the table of parameters both kernels walk.
//
// Note [Replaying the composed update's rounding]
// The fused step must give bitwise what the composed update gives (optim/, Notes [SGD update],
// [Adam update], [RMSprop update], [Adagrad update]), so each rule below performs the composed
// ops' float operations, in their order and in the tensors' dtype T:
//   - `tensor * s` and `tensor.mul_(s)` with a double s run the AffineScalar kernel, s * x + 0 in
//     T: s is rounded to T once, and the "+ 0" is a real addition, which turns a -0 product into
//     +0 (Scaled::factor);
//   - `a.add_(b, alpha)` computes b * alpha that way and adds it, except that alpha == 1 adds b
//     itself. Scaled::alpha writes both as alpha * b + zero: zero is +0 for the first and -0 for
//     the second, because 1 * b + (-0) is b for every b, -0 included. One formula, no branch;
//   - `x / s` is x * (1 / s) with 1 / s in double, `x + eps` is 1 * x + eps (so x + eps), and
//     sqrt, division and maximum are the IEEE operations in T on both devices;
//   - the per-parameter scalars (Adam's bias corrections, Adagrad's decayed lr) are the doubles
//     of core/optimizer_step.h, as in the composed update.
// What the compilers must not do is contract a * b + c into one fused multiply-add, which
// rounds once where the composed ops round twice: core/cpu/optimizer_step.cpp is compiled with
// -ffp-contract=off and cuda/optimizer_step.cu with --fmad=false (CMakeLists.txt). So the CUDA
// kernel gives the CPU's bits too. One difference remains, in the composed update: its AVX2
// copy of the AffineScalar kernel contracts s * x + 0 into one FMA, which differs from two
// roundings only where s * x underflows to zero (the sign of that zero).
#include <cmath>
#include <cstdint>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/kernel_bodies/host_device.h"
#include "core/optimizer_step.h"

namespace ember::optimizer_bodies {

// scale * x + zero in T (see the Note).
template <class T>
struct Scaled {
  T scale, zero;
  // tensor * s and tensor.mul_(s)
  static Scaled factor(double s) { return {static_cast<T>(s), T(0)}; }
  // the alpha of tensor.add_(other, alpha)
  static Scaled alpha(double a) { return {static_cast<T>(a), a == 1.0 ? -T(0) : T(0)}; }
  EMBER_HOST_DEVICE T operator()(T x) const { return scale * x + zero; }
};

struct NoScalars {};

// Each rule is a functor over one element: operator()<kFirstStep>(p, g, s, scalars) updates the
// parameter value p from the gradient value g, with s[0..kStates) the values of the state
// tensors (FusedParam::state's order) and `scalars` the parameter's PerParam. kFirstStep is the
// parameter's FusedParam::state_is_new, a template argument only where it changes the formula
// (kFirstStepDiffers). make() builds the functor on the host, per_param(step) a parameter's
// scalars. Each Note is the composed formula these follow op by op.

// Note [SGD update] in optim/sgd.cpp.
template <class T, bool kMomentum, bool kNesterov, bool kDecay, bool kMaximize>
struct SgdUpdate {
  static constexpr int kStates = kMomentum ? 1 : 0;
  static constexpr bool kFirstStepDiffers = kMomentum;
  using PerParam = NoScalars;
  Scaled<T> decay, momentum, dampening, step;

  static SgdUpdate make(const SgdRule& r) {
    using S = Scaled<T>;
    return {S::factor(r.weight_decay), S::factor(r.momentum), S::alpha(1.0 - r.dampening), S::alpha(-r.lr)};
  }
  PerParam per_param(int64_t) const { return {}; }

  template <bool kFirstStep>
  EMBER_HOST_DEVICE void operator()(T& p, T g, T* s, const PerParam&) const {
    if constexpr (kMaximize) g = -g;
    if constexpr (kDecay) g = g + decay(p);
    if constexpr (kMomentum) {
      const T buf = kFirstStep ? g : momentum(s[0]) + dampening(g);
      s[0] = buf;
      g = kNesterov ? g + momentum(buf) : buf;
    }
    p = p + step(g);
  }
};

// Note [Adam update] in optim/adam.cpp. kDecay with kDecoupled is AdamW's weight decay.
template <class T, bool kDecay, bool kDecoupled, bool kAmsgrad>
struct AdamUpdate {
  static constexpr int kStates = kAmsgrad ? 3 : 2;
  static constexpr bool kFirstStepDiffers = false;
  struct PerParam {
    Scaled<T> step, denom;  // -lr / bias_correction1 (add_'s alpha), 1 / sqrt(bias_correction2)
  };
  Scaled<T> decay, beta1, rest1, beta2, rest2;
  T eps;
  double lr, beta1_value, beta2_value;  // for per_param, on the host

  static AdamUpdate make(const AdamRule& r) {
    using S = Scaled<T>;
    const S decay = kDecoupled ? S::factor(1.0 - r.lr * r.weight_decay) : S::factor(r.weight_decay);
    return {decay, S::factor(r.beta1), S::alpha(1.0 - r.beta1), S::factor(r.beta2), S::alpha(1.0 - r.beta2),
            static_cast<T>(r.eps), r.lr, r.beta1, r.beta2};
  }
  PerParam per_param(int64_t t) const {
    return {Scaled<T>::alpha(-lr / adam_bias_correction(beta1_value, t)),
            Scaled<T>::factor(1.0 / std::sqrt(adam_bias_correction(beta2_value, t)))};
  }

  template <bool>
  EMBER_HOST_DEVICE void operator()(T& p, T g, T* s, const PerParam& x) const {
    if constexpr (kDecay && !kDecoupled) g = g + decay(p);
    if constexpr (kDecay && kDecoupled) p = decay(p);
    const T m = beta1(s[0]) + rest1(g);
    const T v = beta2(s[1]) + rest2(g * g);
    s[0] = m;
    s[1] = v;
    T second = v;
    if constexpr (kAmsgrad) {
      s[2] = s[2] > v ? s[2] : v;  // maximum(v_max, v)
      second = s[2];
    }
    const T denom = x.denom(std::sqrt(second)) + eps;
    p = p + x.step(m / denom);
  }
};

// Note [RMSprop update] in optim/rmsprop.cpp. The state: square_avg, then grad_avg when
// centered, then the momentum buffer when there is momentum.
template <class T, bool kDecay, bool kCentered, bool kMomentum>
struct RMSpropUpdate {
  static constexpr int kStates = 1 + kCentered + kMomentum;
  static constexpr bool kFirstStepDiffers = false;
  using PerParam = NoScalars;
  Scaled<T> decay, alpha, rest, momentum, step;
  T eps;

  static RMSpropUpdate make(const RMSpropRule& r) {
    using S = Scaled<T>;
    return {S::factor(r.weight_decay), S::factor(r.alpha), S::alpha(1.0 - r.alpha), S::factor(r.momentum),
            S::alpha(-r.lr), static_cast<T>(r.eps)};
  }
  PerParam per_param(int64_t) const { return {}; }

  template <bool>
  EMBER_HOST_DEVICE void operator()(T& p, T g, T* s, const PerParam&) const {
    if constexpr (kDecay) g = g + decay(p);
    const T v = alpha(s[0]) + rest(g * g);
    s[0] = v;
    T variance = v;
    if constexpr (kCentered) {
      const T m = alpha(s[1]) + rest(g);
      s[1] = m;
      variance = v - m * m;
    }
    const T denom = std::sqrt(variance) + eps;
    if constexpr (kMomentum) {
      T& buf = s[kStates - 1];
      buf = momentum(buf) + g / denom;
      p = p + step(buf);
    } else {
      p = p + step(g / denom);
    }
  }
};

// Note [Adagrad update] in optim/adagrad.cpp.
template <class T, bool kDecay>
struct AdagradUpdate {
  static constexpr int kStates = 1;
  static constexpr bool kFirstStepDiffers = false;
  struct PerParam {
    Scaled<T> step;  // -adagrad_lr (add_'s alpha)
  };
  Scaled<T> decay;
  T eps;
  double lr, lr_decay;  // for per_param, on the host

  static AdagradUpdate make(const AdagradRule& r) {
    return {Scaled<T>::factor(r.weight_decay), static_cast<T>(r.eps), r.lr, r.lr_decay};
  }
  PerParam per_param(int64_t t) const { return {Scaled<T>::alpha(-adagrad_lr(lr, lr_decay, t))}; }

  template <bool>
  EMBER_HOST_DEVICE void operator()(T& p, T g, T* s, const PerParam& x) const {
    if constexpr (kDecay) g = g + decay(p);
    s[0] = s[0] + g * g;
    p = p + x.step(g / (std::sqrt(s[0]) + eps));
  }
};

// Calls fn.template operator()<b...>() with the runtime bools as template arguments: one
// instantiation per combination, chosen once per call.
template <bool... kChosen, class Fn>
void with_flags(Fn&& fn) {
  fn.template operator()<kChosen...>();
}
template <bool... kChosen, class Fn, class... Rest>
void with_flags(Fn&& fn, bool first, Rest... rest) {
  if (first) with_flags<kChosen..., true>(fn, rest...);
  else with_flags<kChosen..., false>(fn, rest...);
}

// Calls fn.template operator()<T>(update), T being the C++ type of `dtype` and `update` the
// rule's functor for T. The tests of the composed update (`weight_decay != 0`, `momentum > 0`,
// ...) pick the instantiation.
template <class Fn>
void visit_update(const OptimizerRule& rule, DType dtype, Fn&& fn) {
  dispatch_floating(dtype, "optimizer_step", [&]<class T>() {
    const auto call = [&](const auto& update) { fn.template operator()<T>(update); };
    if (const auto* r = std::get_if<SgdRule>(&rule)) {
      with_flags([&]<bool kMomentum, bool kNesterov, bool kDecay, bool kMaximize>() {
        call(SgdUpdate<T, kMomentum, kNesterov, kDecay, kMaximize>::make(*r));
      }, r->momentum != 0.0, r->nesterov, r->weight_decay != 0.0, r->maximize);
    } else if (const auto* r = std::get_if<AdamRule>(&rule)) {
      with_flags([&]<bool kDecay, bool kDecoupled, bool kAmsgrad>() {
        call(AdamUpdate<T, kDecay, kDecoupled, kAmsgrad>::make(*r));
      }, r->weight_decay != 0.0, r->decoupled_weight_decay, r->amsgrad);
    } else if (const auto* r = std::get_if<RMSpropRule>(&rule)) {
      with_flags([&]<bool kDecay, bool kCentered, bool kMomentum>() {
        call(RMSpropUpdate<T, kDecay, kCentered, kMomentum>::make(*r));
      }, r->weight_decay != 0.0, r->centered, r->momentum > 0.0);
    } else {
      const auto& a = std::get<AdagradRule>(rule);
      with_flags([&]<bool kDecay>() { call(AdagradUpdate<T, kDecay>::make(a)); }, a.weight_decay != 0.0);
    }
  });
}

// One parameter as the kernels see it.
template <class T, class PerParam>
struct ParamEntry {
  T* param;
  const T* grad;
  T* state[3];
  int64_t numel;
  bool first_step;
  PerParam scalars;
};

// The table of a call: the parameters with elements, in order.
template <class T, class Update>
std::vector<ParamEntry<T, typename Update::PerParam>> make_table(const Update& update,
                                                                 const std::vector<FusedParam>& params) {
  std::vector<ParamEntry<T, typename Update::PerParam>> table;
  for (const FusedParam& f : params) {
    if (f.param.numel() == 0) continue;
    ParamEntry<T, typename Update::PerParam> e{f.param.data<T>(), f.grad.data<T>(), {}, f.param.numel(),
                                               f.state_is_new, update.per_param(f.step)};
    for (int k = 0; k < Update::kStates; ++k) e.state[k] = f.state[static_cast<size_t>(k)].template data<T>();
    table.push_back(e);
  }
  return table;
}

// Element i of parameter e: loads its values, applies the rule, stores them back.
template <bool kFirstStep, class T, class Update>
EMBER_HOST_DEVICE void update_element(const Update& update, const ParamEntry<T, typename Update::PerParam>& e,
                                      int64_t i) {
  T s[Update::kStates > 0 ? Update::kStates : 1];
  for (int k = 0; k < Update::kStates; ++k) s[k] = e.state[k][i];
  T p = e.param[i];
  update.template operator()<kFirstStep>(p, e.grad[i], s, e.scalars);
  e.param[i] = p;
  for (int k = 0; k < Update::kStates; ++k) e.state[k][i] = s[k];
}

}  // namespace ember::optimizer_bodies
