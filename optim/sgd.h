#pragma once
#include "optim/optimizer.h"

namespace ember::optim {

// SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-4); defaults as torch.optim.SGD.
// fused(false) runs the composed update instead of the fused kernel (Note [Multi-tensor
// optimizer updates] in core/optimizer_step.h); both give the same bits on the CPU.
struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  SGDOptions& maximize(bool v) { maximize_ = v; return *this; }
  SGDOptions& fused(bool v) { fused_ = v; return *this; }

  double lr_;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;
  bool maximize_ = false;
  bool fused_ = true;  // not a hyper-parameter: not in fields()

  void check(const std::string& optimizer) const;
  template <class Self, class Visit>
  static void fields(Self& o, Visit&& visit) {
    visit("lr", o.lr_);
    visit("momentum", o.momentum_);
    visit("dampening", o.dampening_);
    visit("weight_decay", o.weight_decay_);
    visit("nesterov", o.nesterov_);
    visit("maximize", o.maximize_);
  }
};

using SGDParamGroup = ParamGroup<SGDOptions>;

// Stochastic gradient descent with momentum, as torch.optim.SGD (Note [SGD update] in sgd.cpp).
// State per parameter: momentum_buffer (when momentum != 0).
class SGD : public OptimizerWith<SGDOptions> {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options)
      : SGD(std::vector<SGDParamGroup>{{std::move(params), options}}) {}
  explicit SGD(const std::vector<SGDParamGroup>& groups);
  void step() override;
};

}  // namespace ember::optim
