#pragma once
#include "optim/optimizer.h"

namespace ember::optim {

// RMSpropOptions(1e-2).alpha(0.99).eps(1e-8).weight_decay(0).momentum(0).centered(false): the
// defaults of torch.optim.RMSprop. fused(false): the composed update instead of the fused kernel
// (Note [Multi-tensor optimizer updates] in core/optimizer_step.h); the same bits on the CPU.
struct RMSpropOptions {
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  RMSpropOptions& lr(double v) { lr_ = v; return *this; }
  RMSpropOptions& alpha(double v) { alpha_ = v; return *this; }
  RMSpropOptions& eps(double v) { eps_ = v; return *this; }
  RMSpropOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  RMSpropOptions& momentum(double v) { momentum_ = v; return *this; }
  RMSpropOptions& centered(bool v) { centered_ = v; return *this; }
  RMSpropOptions& fused(bool v) { fused_ = v; return *this; }

  double lr_;
  double alpha_ = 0.99;
  double eps_ = 1e-8;
  double weight_decay_ = 0.0;
  double momentum_ = 0.0;
  bool centered_ = false;
  bool fused_ = true;  // not a hyper-parameter: not in fields()

  void check(const std::string& optimizer) const;
  template <class Self, class Visit>
  static void fields(Self& o, Visit&& visit) {
    visit("lr", o.lr_);
    visit("alpha", o.alpha_);
    visit("eps", o.eps_);
    visit("weight_decay", o.weight_decay_);
    visit("momentum", o.momentum_);
    visit("centered", o.centered_);
  }
};

using RMSpropParamGroup = ParamGroup<RMSpropOptions>;

// RMSprop, as torch.optim.RMSprop (Note [RMSprop update] in rmsprop.cpp). State per parameter:
// step (int64 counter), square_avg, momentum_buffer (momentum > 0) and grad_avg (centered).
class RMSprop : public OptimizerWith<RMSpropOptions> {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options)
      : RMSprop(std::vector<RMSpropParamGroup>{{std::move(params), options}}) {}
  explicit RMSprop(const std::vector<RMSpropParamGroup>& groups);
  void step() override;
};

}  // namespace ember::optim
