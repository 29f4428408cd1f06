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
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "examples/training.h"
#include "nn/module_list.h"
#include "utils/checkpoint.h"
#include "utils/layer_chain.h"
#include "utils/layer_profile.h"

namespace ember::examples {

struct CheckpointMode {
  std::string kind;          // none, blocks, sqrt or budget
  int64_t budget_bytes = 0;  // for budget
};

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
// (profile_step_budget); a budget below StepBudget::smallest() is an ember::Error that names it.
// blocks switches the model's blocks to checkpointing for good (until uncheckpoint_modules).
// Every checkpointed region runs with `options` (budget's regions with their planned policy in
// place of options.policy).
Forward checkpointed_forward(const StackedModel& parts, const CheckpointMode& mode, const Tensor& sample,
                             const utils::CheckpointOptions& options = {});

}  // namespace ember::examples
