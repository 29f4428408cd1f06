#pragma once
// Which parameters of a group go to the fused step together (Note [Multi-tensor optimizer updates]
// in core/optimizer_step.h): OptimizerWith::step_params (optim/optimizer.h) routes each parameter
// to the fused step or to the optimizer's composed update, and the fused ones gather here.
#include <vector>

#include "core/optimizer_step.h"

namespace ember::optim {

// The parameters of one group that take the fused step, in batches of one device and dtype:
// one fused_optimizer_step each.
class FusedBatches {
 public:
  void add(FusedParam param);
  void run(const OptimizerRule& rule) const;

 private:
  std::vector<std::vector<FusedParam>> batches_;
};

}  // namespace ember::optim
