// --checkpoint budget=MB on the example models (examples/checkpoint_mode.h): over a grid of
// budgets from the smallest feasible one to a plain step's peak, a training step planned by
// utils::plan_selective stays within its budget and gives bitwise the plain step's gradients, and
// the plans are the same on two runs. GPT and ResNet20 are stacks of one-input blocks; the BERT
// classifier's encoder layers take a mask and run as a chain (Note [Chains of layers]).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/generator.h"
#include "examples/bert.h"
#include "examples/checkpoint_mode.h"
#include "examples/gpt.h"
#include "examples/models.h"
#include "examples/training.h"
#include "test_helpers.h"
#include "utils/op_planner.h"

using namespace ember;
using testutil::values;

namespace {

struct Step {
  int64_t peak;  // above what was live before the step, as budget=MB counts
  std::vector<std::vector<double>> grads;
};

// One training step as fit runs it: gradients set to none, forward, cross-entropy, backward
// without the logits.
Step training_step(nn::Module& model, const examples::Forward& forward, const Tensor& x, const Tensor& y) {
  model.zero_grad();
  manual_seed(10);  // the same Dropout masks in every step
  const int64_t base = memory::stats().live_bytes;
  memory::reset_peak();
  Tensor loss = examples::target_loss(forward(x), y);
  loss.backward();
  Step step{memory::stats().peak_bytes - base, {}};
  for (const Tensor& p : model.parameters()) step.grads.push_back(values(p.grad()));
  return step;
}

// The grid: `points` budgets from the smallest feasible one to the plain step's peak.
void expect_every_budget_holds(const examples::StackedModel& parts, const Tensor& x, const Tensor& y, int points) {
  const Step plain = training_step(parts.model, [&](const Tensor& in) { return parts.model(in); }, x, y);
  const int64_t smallest = examples::profile_step_budget(parts, x).smallest();
  ASSERT_LT(smallest, plain.peak) << "checkpointing should save memory on this model";
  for (int i = 0; i < points; ++i) {
    const int64_t budget = smallest + (plain.peak - smallest) * i / (points - 1);
    const Step planned =
        training_step(parts.model, examples::checkpointed_forward(parts, {"budget", budget}, x), x, y);
    EXPECT_LE(planned.peak, budget) << "budget " << budget << " (smallest " << smallest << ", plain " << plain.peak
                                    << ")";
    EXPECT_EQ(planned.grads, plain.grads) << "budget " << budget;
  }
}

// The plan of budget=MB for the blocks, made twice from scratch.
void expect_the_same_plan_twice(const examples::StackedModel& parts, const Tensor& blocks_input, int64_t budget) {
  const utils::LayerChain chain = parts.block_chain();
  const utils::SelectivePlan first = utils::plan_selective(chain, blocks_input, budget);
  const utils::SelectivePlan second = utils::plan_selective(chain, blocks_input, budget);
  EXPECT_EQ(first.str(), second.str());
  EXPECT_EQ(first.predicted_peak_bytes, second.predicted_peak_bytes);
  EXPECT_EQ(first.recompute_flops, second.recompute_flops);
}

}  // namespace

// Note [Budgeting a training step]: budget=MB bounds the whole step, the embeddings, the head, the
// logits and the cross-entropy included, not only the blocks.
TEST(CheckpointBudget, GPT) {
  examples::GPTConfig c;
  c.vocab_size = 40;
  c.context = 32;
  c.embed_dim = 16;
  c.num_heads = 2;
  c.num_layers = 6;
  c.dropout = 0.1;
  manual_seed(4);
  const Tensor x = randint(0, 40, {8, 32}), y = randint(0, 40, {8, 32});
  manual_seed(9);
  examples::GPT model(c);
  const examples::StackedModel parts{model, model.blocks, [&model](const Tensor& ids) { return model.stem_forward(ids); },
                                     [&model](const Tensor& h) { return model.head_forward(h); }};
  const Step plain = training_step(model, [&model](const Tensor& in) { return model(in); }, x, y);
  const examples::StepBudget measured = examples::profile_step_budget(parts, x);
  // The profile measures the step fit runs, with targets of its own where fit's were live before.
  EXPECT_GE(measured.plain_step_peak, plain.peak);
  EXPECT_LE(measured.plain_step_peak, plain.peak + static_cast<int64_t>(y.nbytes()));
  EXPECT_GT(measured.outside, 0);
  const int64_t smallest = measured.smallest();
  try {
    examples::checkpointed_forward(parts, {"budget", smallest - 1}, x);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[checkpoint budget] no plan fits a training step into"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("the smallest feasible budget for this model and batch is " +
                                         memory::format_bytes(smallest) + " (" + std::to_string(smallest) + " bytes)"),
              std::string::npos)
        << e.what();
  }
  expect_every_budget_holds(parts, x, y, 7);
  const Tensor h = model.stem_forward(x).detach().requires_grad_();
  expect_the_same_plan_twice(parts, h, utils::min_feasible_budget(utils::profile_layers(parts.block_chain(), h)) * 3 / 2);
}

TEST(CheckpointBudget, ResNet20) {
  manual_seed(4);
  const Tensor x = randn({4, 1, 28, 28}), y = randint(0, 10, {4});
  manual_seed(9);
  examples::ResNet20 model;
  const examples::StackedModel parts{model, model.blocks, [&model](const Tensor& in) { return model.stem_forward(in); },
                                     [&model](const Tensor& h) { return model.head_forward(h); }};
  // Planning runs steps of its own; they leave BatchNorm's running statistics as they were.
  std::vector<std::vector<double>> statistics;
  for (const Tensor& b : model.buffers()) statistics.push_back(values(b));
  examples::checkpointed_forward(parts, {"budget", examples::profile_step_budget(parts, x).smallest()}, x);
  std::vector<std::vector<double>> after;
  for (const Tensor& b : model.buffers()) after.push_back(values(b));
  EXPECT_EQ(after, statistics);
  expect_every_budget_holds(parts, x, y, 5);
  const Tensor h = model.stem_forward(x).detach().requires_grad_();
  expect_the_same_plan_twice(parts, h, utils::min_feasible_budget(utils::profile_layers(parts.block_chain(), h)) * 3 / 2);
}

TEST(CheckpointBudget, BertEncoderLayersTakeTheirMaskThroughAChain) {
  examples::BertConfig c;
  c.vocab_size = 20;
  c.hidden = 16;
  c.num_layers = 4;
  c.num_heads = 2;
  c.intermediate = 32;
  c.max_positions = 16;
  c.dropout = c.attention_dropout = 0.1;
  manual_seed(9);
  examples::BertClassifier model(c, 3);
  // Four texts of 12, 9, 12 and 5 tokens: ids, then masks.
  manual_seed(4);
  const Tensor ids = randint(1, 20, {4, 12});
  const Tensor lengths = from_vector<int64_t>({12, 9, 12, 5}, {4, 1}, TensorOptions(kInt64));
  const Tensor mask = (arange(0, 12, 1, TensorOptions(kInt64)).unsqueeze(0) < lengths).to(kInt64);
  const Tensor x = stack({ids * mask, mask}, 1), y = from_vector<int64_t>({2, 0, 1, 1}, {4}, TensorOptions(kInt64));
  expect_every_budget_holds(examples::stacked(model), x, y, 5);
}
