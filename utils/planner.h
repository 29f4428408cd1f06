#pragma once
// Memory-budget planner for checkpoint_sequential: profile a Sequential (or any ModuleList run in
// order) once, then choose which
// runs of layers to checkpoint so the predicted peak fits a byte budget with the least recompute.
// See Note [Checkpoint planning] in utils/planner.cpp and docs/checkpointing.md.
#include <string>
#include <utility>
#include <vector>

#include "nn/sequential.h"
#include "utils/checkpoint.h"

namespace ember::utils {

// Measured in one dry run of the forward (training mode, grad on; generator states and
// BatchNorm statistics are left as they were).
struct LayerProfile {
  std::string name;
  int64_t live_after = 0;    // live bytes after the layer ran, relative to before the first
  int64_t output_bytes = 0;  // bytes of the layer's output
  int64_t grad_bytes = 0;    // bytes of the gradients backward leaves for its trainable parameters
  double forward_ms = 0;
};
std::vector<LayerProfile> profile_layers(nn::ModuleList& seq, const Tensor& sample);

struct CheckpointPlan {
  struct Segment {
    size_t begin, end;  // layers [begin, end)
    bool checkpointed;
  };
  std::vector<Segment> segments;
  int64_t predicted_peak_bytes = 0;  // above what was live before the forward
  double recompute_ms = 0;           // the forward time of the checkpointed layers
  std::string str() const;           // "[0,4) ckpt | [4,8) ckpt | [8,16) plain"
};

// The plan with the least recompute whose predicted peak fits `budget_bytes`. Throws an
// ember::Error giving the smallest feasible budget when none fits.
CheckpointPlan plan_checkpoints(const std::vector<LayerProfile>& layers, int64_t budget_bytes);
// The smallest budget any plan fits (under the same memory model).
int64_t min_feasible_budget(const std::vector<LayerProfile>& layers);
// The peak the model predicts for a given plan.
int64_t predicted_peak(const std::vector<LayerProfile>& layers, const CheckpointPlan& plan);

// Runs seq following a plan.
Tensor run_plan(nn::ModuleList& seq, const CheckpointPlan& plan, const Tensor& x,
                const CheckpointOptions& options = {});

struct MemoryBudget {
  int64_t bytes;
};
// Profiles seq on x, plans for the budget and runs the plan (convenient for one call; a
// training loop plans once and calls run_plan).
Tensor checkpoint_sequential(nn::ModuleList& seq, MemoryBudget budget, const Tensor& x,
                             const CheckpointOptions& options = {});

}  // namespace ember::utils
