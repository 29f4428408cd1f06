#pragma once
// Per-op planning inside checkpointed regions: profile what a policy sees of a region's ops, then
// choose which op outputs to keep so that they hold at most a byte budget and the recompute does
// the least work; the plan is a policy (utils/checkpoint.h). See Note [Planning per-op saves] in
// utils/op_planner.cpp and docs/checkpointing.md section 10. (utils/planner.h chooses the
// segments; this chooses what each checkpointed segment keeps.)
#include <string>
#include <vector>

#include "nn/module.h"
#include "utils/checkpoint.h"
#include "utils/layer_chain.h"
#include "utils/layer_profile.h"
#include "utils/planner.h"

namespace ember::utils {

// What a policy sees of each op of one forward of fn(inputs) (or of module(input)), run once as a
// checkpointed region. The run leaves no trace (generators and BatchNorm statistics as they were)
// and runs no backward. An op on tensors of which none requires grad is not recorded, so give
// inputs that require grad where the real ones will, or the indices will not match.
std::vector<OpInfo> profile_ops(const MultiFunction& fn, const std::vector<Tensor>& inputs);
std::vector<OpInfo> profile_ops(nn::Module& module, const Tensor& input);

struct OpPlan {
  struct Kept {
    int64_t index;     // the op's OpInfo::index in the region
    std::string name;  // its name, checked when the plan is applied
  };
  std::vector<Kept> kept;        // the base policy's MustSave ops included
  int64_t kept_bytes = 0;        // what the kept outputs hold, per region
  int64_t saved_flops = 0;       // the recompute work the kept ops save
  int64_t recompute_flops = 0;   // the work of the ops left to recompute
  std::string str() const;       // "keep 1 matmul, 4 gelu: 2048 bytes, 1536 of 2048 flops saved"
};

// The ops to keep, among those `base` only prefers something for, so that the kept outputs (the
// base's MustSave ones included) hold at most `budget_bytes` and the recompute's work is least:
// an exact 0/1 knapsack. Throws if the base's MustSave ops alone exceed the budget.
OpPlan plan_op_saves(const std::vector<OpInfo>& ops, int64_t budget_bytes,
                     const CheckpointPolicy& base = recompute_all());
// The same for several regions that share one budget: one knapsack over the ops of all of them
// (each region's early stop and MustSave ops as above); a plan per region.
std::vector<OpPlan> plan_op_saves(const std::vector<std::vector<OpInfo>>& regions, int64_t budget_bytes,
                                  const CheckpointPolicy& base = recompute_all());

// The plan as a policy: PreferSave for the planned ops (by index in the region, when the name
// matches), what `base` insists on where it insists (Note [Decision strengths]), PreferRecompute
// for the rest. Give it the base the plan was made with.
CheckpointPolicy planned_policy(const OpPlan& plan, const CheckpointPolicy& base = recompute_all());

// Segments for `budget_bytes` (plan_checkpoints on profile_layers), then per-op saves in the
// checkpointed segments with what the segment plan leaves of the budget: one knapsack over the
// ops of all of them (Note [Planning per-op saves]).
struct SelectivePlan {
  CheckpointPlan segments;
  std::vector<OpPlan> ops;           // per segment (nothing kept in a plain one)
  int64_t predicted_peak_bytes = 0;  // the segments' prediction plus every kept_bytes: a bound
  int64_t recompute_flops = 0;       // op by op, over the checkpointed segments: what it minimises
  std::string str() const;           // "[0,4) ckpt, keep 2 matmul: ... | [4,8) plain"
};
SelectivePlan plan_selective(const LayerChain& chain, const Tensor& sample, int64_t budget_bytes);
// The same with the chain's profile on `sample` (profile_layers) already made.
SelectivePlan plan_selective(const LayerChain& chain, const std::vector<LayerProfile>& profile, const Tensor& sample,
                             int64_t budget_bytes);
// Runs the chain following the plan, each checkpointed segment with its planned policy (in place
// of options.policy).
Tensor run_plan(const LayerChain& chain, const SelectivePlan& plan, const Tensor& x, CheckpointOptions options = {});

}  // namespace ember::utils
