#pragma once
#include <array>

#include "optim/optimizer.h"

namespace ember::optim {

// AdamWOptions(1e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(1e-2).amsgrad(false): the
// defaults of torch.optim.AdamW.
struct AdamWOptions {
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  AdamWOptions& lr(double v) { lr_ = v; return *this; }
  AdamWOptions& betas(std::array<double, 2> v) { beta1_ = v[0]; beta2_ = v[1]; return *this; }
  AdamWOptions& eps(double v) { eps_ = v; return *this; }
  AdamWOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  AdamWOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }

  double lr_;
  double beta1_ = 0.9;
  double beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_ = 1e-2;
  bool amsgrad_ = false;

  void check(const std::string& optimizer) const;
  template <class Self, class Visit>
  static void fields(Self& o, Visit&& visit) {
    visit("lr", o.lr_);
    visit("beta1", o.beta1_);
    visit("beta2", o.beta2_);
    visit("eps", o.eps_);
    visit("weight_decay", o.weight_decay_);
    visit("amsgrad", o.amsgrad_);
  }
};

using AdamWParamGroup = ParamGroup<AdamWOptions>;

// Adam with decoupled weight decay, as torch.optim.AdamW (Note [AdamW update] in adamw.cpp).
// State per parameter: step (int64 counter), exp_avg, exp_avg_sq, and max_exp_avg_sq with amsgrad.
class AdamW : public OptimizerWith<AdamWOptions> {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options)
      : AdamW(std::vector<AdamWParamGroup>{{std::move(params), options}}) {}
  explicit AdamW(const std::vector<AdamWParamGroup>& groups);
  void step() override;
};

}  // namespace ember::optim
