#pragma once
#include "optim/optimizer.h"

namespace ember::optim {

// AdagradOptions(1e-2).lr_decay(0).weight_decay(0).initial_accumulator_value(0).eps(1e-10): the
// defaults of torch.optim.Adagrad. fused(false): the composed update instead of the fused kernel
// (Note [Multi-tensor optimizer updates] in core/optimizer_step.h); the same bits on the CPU.
struct AdagradOptions {
  explicit AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  AdagradOptions& lr(double v) { lr_ = v; return *this; }
  AdagradOptions& lr_decay(double v) { lr_decay_ = v; return *this; }
  AdagradOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  AdagradOptions& initial_accumulator_value(double v) { initial_accumulator_value_ = v; return *this; }
  AdagradOptions& eps(double v) { eps_ = v; return *this; }
  AdagradOptions& fused(bool v) { fused_ = v; return *this; }

  double lr_;
  double lr_decay_ = 0.0;
  double weight_decay_ = 0.0;
  double initial_accumulator_value_ = 0.0;
  double eps_ = 1e-10;
  bool fused_ = true;  // not a hyper-parameter: not in fields()

  void check(const std::string& optimizer) const;
  template <class Self, class Visit>
  static void fields(Self& o, Visit&& visit) {
    visit("lr", o.lr_);
    visit("lr_decay", o.lr_decay_);
    visit("weight_decay", o.weight_decay_);
    visit("initial_accumulator_value", o.initial_accumulator_value_);
    visit("eps", o.eps_);
  }
};

using AdagradParamGroup = ParamGroup<AdagradOptions>;

// Adagrad, as torch.optim.Adagrad (Note [Adagrad update] in adagrad.cpp). State per parameter:
// step (int64 counter) and sum.
class Adagrad : public OptimizerWith<AdagradOptions> {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradOptions& options)
      : Adagrad(std::vector<AdagradParamGroup>{{std::move(params), options}}) {}
  explicit Adagrad(const std::vector<AdagradParamGroup>& groups);
  void step() override;
};

}  // namespace ember::optim
