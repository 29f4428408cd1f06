#pragma once
// The --checkpoint flag of the training programs, for models built as a stem, a stack of blocks
// run in order and a head (the ResNet's BasicBlocks, the GPT's transformer blocks):
//   none       every activation kept
//   blocks     each block checkpointed (utils::checkpoint_modules)
//   sqrt       the blocks in round(sqrt(n)) segments (utils::checkpoint_sequential)
//   budget=MB  segments chosen by the planner to fit MB of the blocks' activations
#include <cstdint>
#include <functional>
#include <string>

#include "examples/training.h"
#include "nn/module_list.h"

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
};

// The forward a training step runs in `mode`: head(blocks(stem(x))), the blocks checkpointed as
// the mode says. `sample` is an input batch, used by budget to profile the blocks once (the stem
// runs in eval mode for it, so BatchNorm statistics and Dropout generators are left alone).
// blocks switches the model's blocks to checkpointing for good (until uncheckpoint_modules).
Forward checkpointed_forward(const StackedModel& parts, const CheckpointMode& mode, const Tensor& sample);

}  // namespace ember::examples
