#pragma once
// Memory-budget planner for checkpoint_sequential: profile one plain step of a Sequential, of
// any ModuleList run in order, or of any chain of layers (utils/layer_chain.h, utils/layer_profile.h),
// then choose which runs of layers to checkpoint so the predicted peak of a step fits a byte
// budget with the least recompute.
// See Note [Checkpoint planning] in utils/planner.cpp and docs/checkpointing.md.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "utils/layer_chain.h"
#include "utils/checkpoint.h"
#include "utils/layer_profile.h"

namespace ember::utils {

struct CheckpointPlan {
  struct Segment {
    size_t begin, end;  // layers [begin, end)
    bool checkpointed;
  };
  std::vector<Segment> segments;
  int64_t predicted_peak_bytes = 0;  // above what was live before the forward
  int64_t recompute_flops = 0;       // the work recomputed per step: what the plan minimises
  double recompute_ms = 0;           // the profile's forward time of the recomputed layers
  std::string str() const;           // "[0,4) ckpt | [4,8) ckpt | [8,16) plain"
};

// The plan with the least recompute whose predicted peak fits `budget_bytes`. Throws an
// ember::Error giving the smallest feasible budget when none fits. The prediction bounds the
// measured peak of a step that runs the plan (Note [Checkpoint planning]), so a step that starts
// with no parameter gradients (zero_grad) stays within the budget; a loss after the Sequential
// adds what it keeps itself.
CheckpointPlan plan_checkpoints(const std::vector<LayerProfile>& layers, int64_t budget_bytes);
// The smallest budget any plan fits (under the same memory model).
int64_t min_feasible_budget(const std::vector<LayerProfile>& layers);
// The peak the model predicts for a given plan.
int64_t predicted_peak(const std::vector<LayerProfile>& layers, const CheckpointPlan& plan);

// The forward of one segment: its layers of the chain in order.
std::function<Tensor(const Tensor&)> segment_forward(const LayerChain& chain, CheckpointPlan::Segment segment);

// Runs the chain following a plan; with options_of, segment i (of plan.segments) checkpoints with
// options_of(i).
Tensor run_plan(const LayerChain& chain, const CheckpointPlan& plan, const Tensor& x,
                const CheckpointOptions& options = {});
Tensor run_plan(const LayerChain& chain, const CheckpointPlan& plan, const Tensor& x,
                const std::function<CheckpointOptions(size_t segment)>& options_of);

struct MemoryBudget {
  int64_t bytes;
};
// Profiles the chain on x, plans for the budget and runs the plan (convenient for one call; a
// training loop plans once and calls run_plan).
Tensor checkpoint_sequential(const LayerChain& chain, MemoryBudget budget, const Tensor& x,
                             const CheckpointOptions& options = {});

}  // namespace ember::utils
