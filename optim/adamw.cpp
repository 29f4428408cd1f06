#include "optim/adamw.h"

namespace ember::optim {

AdamW::AdamW(const std::vector<AdamWParamGroup>& groups) : OptimizerWith("AdamW", groups, adam_state_specs()) {}

void AdamW::step() {
  for_each_param_with_grad([](const Tensor& p, const Tensor& g, const AdamWOptions& o, ParamState& state) {
    adam_update(p, g, o, state, WeightDecayMode::Decoupled);
  });
}

}  // namespace ember::optim
