#include "optim/adamw.h"

namespace ember::optim {

AdamW::AdamW(const std::vector<AdamWParamGroup>& groups) : OptimizerWith("AdamW", groups, adam_state_specs()) {}

void AdamW::step() {
  step_params([](const AdamWOptions& o) { return adam_rule(o, WeightDecayMode::Decoupled); }, adam_fused,
              [](const Tensor& p, const Tensor& g, const AdamWOptions& o, std::map<std::string, Tensor>& state) {
                adam_reference(p, g, o, state, WeightDecayMode::Decoupled);
              });
}

}  // namespace ember::optim
