#pragma once
// The --checkpoint flag of the training programs, for models built as a stem, a stack of blocks
// run in order and a head (the ResNet's BasicBlocks, the GPT's transformer blocks):
//   none       every activation kept
//   blocks     each block but the last checkpointed (utils::checkpoint_modules; Note [The last
//              block stays plain] in examples/checkpoint_mode.cpp)
//   sqrt       the blocks in round(sqrt(n)) segments (utils::checkpoint_sequential)
//   budget=MB  segments, and the ops whose outputs each checkpointed segment keeps, chosen by the
//              planner (utils::plan_selective) so that a whole training step (forward, loss and
//              backward, above what was live before it) fits MB (Note [Budgeting a training step])
//   auto       budget= with what the device's memory limit leaves a step (utils/limit_plan.h); no
//              checkpointing without a limit or where a plain step fits under it
// Under a memory limit every mode but auto also measures the step, so that an OutOfMemoryError
// says which checkpointing, or which batch, would fit (Note [Advice under a limit]).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "examples/training.h"
#include "nn/module_list.h"
#include "optim/optimizer.h"
#include "utils/checkpoint.h"
#include "utils/layer_chain.h"
#include "utils/layer_profile.h"

namespace ember::examples {

struct CheckpointMode {
  std::string kind;          // none, blocks, sqrt, budget or auto
  int64_t budget_bytes = 0;  // for budget
  // Under a memory limit: what a training step holds that is not live when it is planned
  // (bytes_to_come).
  int64_t to_come = 0;
};

// What a training step on `device` holds that is not live before the first one: the optimizer's
// state (Optimizer::full_state_bytes), the batch's targets and, on the CPU, the batches the
// loader's workers hold ahead, at most `batch_bytes` (inputs and targets) each.
int64_t bytes_to_come(const optim::Optimizer& optimizer, const data::DataLoader& loader, int64_t batch_bytes,
                      Device device);

// Checked before any work is done: an ember::Error naming `program` for anything else.
CheckpointMode parse_checkpoint_mode(const std::string& mode, const std::string& program);

// A model's parts around its blocks, for callers that run the blocks themselves.
struct StackedModel {
  nn::Module& model;
  nn::ModuleList& blocks;
  std::function<Tensor(const Tensor&)> stem, head;
  // How sqrt and budget run the blocks one after another, for blocks that take more than the
  // previous one's output (an encoder layer's mask: Note [Chains of layers] in
  // utils/layer_chain.h); none: the blocks themselves, each called with one tensor.
  std::optional<utils::LayerChain> chain = std::nullopt;

  utils::LayerChain block_chain() const { return chain ? *chain : utils::LayerChain(blocks); }
};

// What budget=MB plans with, measured on a sample batch (Note [Budgeting a training step] in
// examples/checkpoint_mode.cpp). Measuring leaves no trace on the model (generators, BatchNorm
// statistics and .grad as they were).
struct StepBudget {
  int64_t plain_step_peak = 0;              // a plain training step's measured peak
  int64_t outside = 0;                      // what a step's budget keeps for all but the blocks
  std::vector<utils::LayerProfile> blocks;  // the blocks' profile
  int64_t smallest() const;                 // the smallest budget a step fits: outside + the blocks' least
};
StepBudget profile_step_budget(const StackedModel& parts, const Tensor& sample);

// The forward a training step runs in `mode`: head(blocks(stem(x))), the blocks checkpointed as
// the mode says. `sample` is an input batch, used by budget to measure a step once
// (profile_step_budget); a budget below StepBudget::smallest() is an ember::Error that names it,
// and so is a limit under which auto finds no plan (naming the smallest limit that would work).
// blocks switches the model's blocks to checkpointing for good (until uncheckpoint_modules).
// Every checkpointed region runs with `options` (budget's regions with their planned policy in
// place of options.policy).
Forward checkpointed_forward(const StackedModel& parts, const CheckpointMode& mode, const Tensor& sample,
                             const utils::CheckpointOptions& options = {});

}  // namespace ember::examples
