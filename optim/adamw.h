#pragma once
#include "optim/adam.h"

namespace ember::optim {

// AdamWOptions(1e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(1e-2).amsgrad(false): the
// defaults of torch.optim.AdamW.
struct AdamWOptions : AdamOptionsBase<AdamWOptions> {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptionsBase(lr, 1e-2) {}
};

using AdamWParamGroup = ParamGroup<AdamWOptions>;

// Adam with decoupled weight decay, as torch.optim.AdamW (Note [Adam update] in adam.cpp).
// State per parameter: step (int64 counter), exp_avg, exp_avg_sq, and max_exp_avg_sq with amsgrad.
class AdamW : public OptimizerWith<AdamWOptions> {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options)
      : AdamW(std::vector<AdamWParamGroup>{{std::move(params), options}}) {}
  explicit AdamW(const std::vector<AdamWParamGroup>& groups);
  void step() override;
};

}  // namespace ember::optim
