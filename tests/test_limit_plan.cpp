// Training under a memory limit (Note [Planning for a memory limit] in utils/limit_plan.cpp,
// Note [Advice under a limit] in examples/checkpoint_mode.cpp), on the GPT and ResNet20 of the
// example programs:
//  * --checkpoint auto under limits of 0.6, 0.4 and 0.25 times what a plain training step holds at
//    its peak (0.6 for ResNet20, whose smallest plan needs more than 0.4) trains the step (forward, loss, backward, optimizer step) without meeting the limit,
//    with gradients bitwise those of the plain step run without a limit;
//  * a limit that no plan meets is refused before the step, naming the smallest limit that would
//    work, and that limit works;
//  * a plain step under a limit fails with an OutOfMemoryError that names the module, the phase,
//    what the memory holds (summing to the live total) and the advice; the process is left as it
//    was (no tensor of the failed step live) and trains with the advice under the same limit.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/generator.h"
#include "core/memory_category.h"
#include "core/memory_limit.h"
#include "core/out_of_memory.h"
#include "examples/checkpoint_mode.h"
#include "examples/gpt.h"
#include "examples/models.h"
#include "examples/training.h"
#include "optim/adamw.h"
#include "test_helpers.h"
#include "utils/limit_plan.h"
#include "utils/planner.h"

using namespace ember;
using testutil::values;

namespace {

// A model, its optimizer and a batch, made the same way every time.
struct Trial {
  std::unique_ptr<nn::Module> model;
  std::unique_ptr<examples::StackedModel> parts;
  std::unique_ptr<optim::Optimizer> optimizer;
  Tensor x, y;
};
using MakeTrial = std::function<Trial()>;

// The trial of a model with stem_forward, blocks and head_forward (the GPT, ResNet20), made after
// manual_seed(9), trained with AdamW.
template <class Model, class... Args>
Trial trial_of(Tensor x, Tensor y, Args&&... args) {
  Trial s;
  s.x = std::move(x);
  s.y = std::move(y);
  manual_seed(9);
  auto model = std::make_unique<Model>(std::forward<Args>(args)...);
  Model& m = *model;
  s.parts = std::make_unique<examples::StackedModel>(
      examples::StackedModel{m, m.blocks, [&m](const Tensor& in) { return m.stem_forward(in); },
                             [&m](const Tensor& h) { return m.head_forward(h); }});
  s.optimizer = std::make_unique<optim::AdamW>(m.parameters(), optim::AdamWOptions(1e-3));
  s.model = std::move(model);
  return s;
}

examples::GPTConfig gpt_config() {
  examples::GPTConfig c;
  c.vocab_size = 40;
  c.context = 64;
  c.embed_dim = 32;
  c.num_heads = 2;
  c.num_layers = 12;
  c.dropout = 0.1;
  return c;
}

Trial gpt_trial() {
  manual_seed(4);
  Tensor x = randint(0, 40, {16, 64}), y = randint(0, 40, {16, 64});
  return trial_of<examples::GPT>(std::move(x), std::move(y), gpt_config());
}

Trial resnet_trial() {
  manual_seed(4);
  Tensor x = randn({32, 1, 28, 28}), y = randint(0, 10, {32});
  return trial_of<examples::ResNet20>(std::move(x), std::move(y));
}

struct StepResult {
  std::vector<std::vector<double>> grads;
  int64_t peak = 0;  // the most the step held, from before the model was made
};

// One step as fit runs it: gradients to none, forward, cross-entropy, backward without the
// logits, the optimizer's step.
std::vector<std::vector<double>> train_step(Trial& s, const examples::Forward& forward) {
  s.optimizer->zero_grad();
  manual_seed(10);  // the same Dropout masks in every run
  Tensor loss = examples::target_loss(forward(s.x), s.y);
  loss.backward();
  loss = Tensor();
  std::vector<std::vector<double>> grads;
  for (const Tensor& p : s.model->parameters()) grads.push_back(values(p.grad()));
  s.optimizer->step();
  return grads;
}

examples::Forward plain(Trial& s) {
  return [&s](const Tensor& x) { return (*s.model)(x); };
}

// The plain step without a limit, from a setup made from nothing.
StepResult plain_run(const MakeTrial& make, int64_t& base) {
  memory::empty_cache();
  base = memory::stats().live_bytes;
  Trial s = make();
  memory::reset_peak();
  StepResult r;
  r.grads = train_step(s, plain(s));
  r.peak = memory::stats().peak_bytes - base;
  return r;
}

struct LimitGuard {
  explicit LimitGuard(int64_t bytes) { memory::set_limit(kCPU, bytes); }
  ~LimitGuard() {
    memory::clear_limit(kCPU);
    memory::set_out_of_memory_advice(kCPU, "");
  }
};

examples::CheckpointMode auto_mode(const Trial& s) { return {"auto", 0, s.optimizer->full_state_bytes(kCPU)}; }

// The number of bytes in "(N bytes)" after `after` in `text`.
int64_t bytes_after(const std::string& text, const std::string& after) {
  const size_t at = text.find(after);
  if (at == std::string::npos) return -1;
  const size_t open = text.find('(', at + after.size());
  return std::stoll(text.substr(open + 1));
}

void expect_auto_trains_under_fractions(const MakeTrial& make, const std::vector<double>& fractions) {
  int64_t base = 0;
  const StepResult reference = plain_run(make, base);
  for (const double fraction : fractions) {
    SCOPED_TRACE("limit " + std::to_string(fraction) + " x the plain step's peak of " + std::to_string(reference.peak));
    memory::empty_cache();
    const int64_t limit = base + static_cast<int64_t>(fraction * static_cast<double>(reference.peak));
    Trial s = make();
    const LimitGuard guard(limit);
    const examples::Forward forward = examples::checkpointed_forward(*s.parts, auto_mode(s), s.x);
    memory::reset_peak();
    std::vector<std::vector<double>> grads;
    try {
      grads = train_step(s, forward);
    } catch (const OutOfMemoryError& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    EXPECT_LE(memory::stats().peak_bytes, limit);
    EXPECT_LE(memory::stats().reserved_bytes, limit);
    EXPECT_EQ(grads, reference.grads);
  }
}

TEST(LimitPlan, AutoTrainsTheGPTUnderAFractionOfItsPlainPeak) {
  expect_auto_trains_under_fractions(gpt_trial, {0.6, 0.4, 0.25});
}

// ResNet20 checkpoints whole BasicBlocks: the stem's activations and one block of the first stage
// at 28 x 28 stay, besides the parameters and AdamW's state, and its smallest plan needs more
// than a limit at the fraction 0.4 leaves. There the step is refused before it runs, naming the
// limit that works, and that limit works.
TEST(LimitPlan, AutoTrainsResNet20UnderAFractionOfItsPlainPeak) {
  expect_auto_trains_under_fractions(resnet_trial, {0.6});
  int64_t base = 0;
  const StepResult reference = plain_run(resnet_trial, base);
  memory::empty_cache();
  Trial s = resnet_trial();
  int64_t smallest_limit = 0;
  {
    const LimitGuard guard(base + reference.peak * 2 / 5);
    try {
      examples::checkpointed_forward(*s.parts, auto_mode(s), s.x);
      ADD_FAILURE() << "0.4 of the plain peak was expected not to fit ResNet20's smallest plan";
    } catch (const Error& e) {
      smallest_limit = bytes_after(e.what(), "the smallest limit that would work is ");
    }
  }
  ASSERT_GT(smallest_limit, 0);
  const LimitGuard guard(smallest_limit);
  const examples::Forward forward = examples::checkpointed_forward(*s.parts, auto_mode(s), s.x);
  memory::reset_peak();
  EXPECT_EQ(train_step(s, forward), reference.grads);
  EXPECT_LE(memory::stats().reserved_bytes, smallest_limit);
}

TEST(LimitPlan, NoLimitMeansNoCheckpointing) {
  const auto step_peak = [](Trial& s, const examples::Forward& forward) {
    memory::reset_peak();
    const int64_t before = memory::stats().live_bytes;
    train_step(s, forward);
    return memory::stats().peak_bytes - before;
  };
  Trial a = gpt_trial();
  const examples::Forward automatic = examples::checkpointed_forward(*a.parts, auto_mode(a), a.x);
  Trial b = gpt_trial();
  EXPECT_EQ(step_peak(a, automatic), step_peak(b, plain(b)));
}

TEST(LimitPlan, ALimitNoPlanMeetsIsRefusedBeforeTheStepNamingOneThatWorks) {
  memory::empty_cache();
  Trial s = gpt_trial();
  int64_t smallest_limit = 0;
  {
    const LimitGuard guard(memory::stats().live_bytes + s.optimizer->full_state_bytes(kCPU) + (1 << 20));
    try {
      examples::checkpointed_forward(*s.parts, auto_mode(s), s.x);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("[checkpoint auto] no checkpointing fits a training step under the limit of"),
                std::string::npos)
          << message;
      smallest_limit = bytes_after(message, "the smallest limit that would work is ");
      EXPECT_GT(smallest_limit, 0) << message;
      EXPECT_NE(message.find("\n  advice: no checkpointing fits"), std::string::npos) << message;
    }
  }
  const LimitGuard guard(smallest_limit);
  const examples::Forward forward = examples::checkpointed_forward(*s.parts, auto_mode(s), s.x);
  train_step(s, forward);
  EXPECT_LE(memory::stats().reserved_bytes, smallest_limit);
}

// utils::plan_for_limit on the GPT's blocks alone, which bounds what the chain adds above its
// input: no limit, no checkpointing; a limit between the smallest plan and a plain step, a plan that
// runs under it within its prediction; a limit below the smallest plan, refused, naming the limit
// that works.
TEST(LimitPlan, PlanForLimitFitsTheChainOrNamesTheLimitThatWould) {
  Trial s = gpt_trial();
  examples::GPT& gpt = static_cast<examples::GPT&>(*s.model);
  const utils::LayerChain chain(gpt.blocks);
  const Tensor h = gpt.stem_forward(s.x).detach().requires_grad_();
  const utils::SelectivePlan plain = utils::plan_for_limit(chain, h);
  ASSERT_EQ(plain.segments.segments.size(), 1u);
  EXPECT_FALSE(plain.segments.segments[0].checkpointed);
  const int64_t smallest = utils::min_feasible_budget(utils::profile_layers(chain, h));
  ASSERT_LT(smallest, plain.predicted_peak_bytes);

  memory::empty_cache();
  const int64_t live = memory::stats().live_bytes;
  const int64_t budget = (smallest + plain.predicted_peak_bytes) / 2;
  {
    const LimitGuard guard(utils::LimitBudget{0, live, 0}.limit_for(budget));
    const utils::SelectivePlan plan = utils::plan_for_limit(chain, h);
    EXPECT_LE(plan.predicted_peak_bytes, budget + 1);  // limit_for rounds the limit up
    bool checkpointed = false;
    for (const auto& segment : plan.segments.segments) checkpointed |= segment.checkpointed;
    EXPECT_TRUE(checkpointed) << plan.str();
    memory::reset_peak();
    Tensor out = utils::run_plan(chain, plan, h);
    out.backward(ones(out.shape()));
    EXPECT_LE(memory::stats().peak_bytes - live, plan.predicted_peak_bytes);
  }

  int64_t smallest_limit = 0;
  {
    const LimitGuard guard(live + smallest / 2);
    try {
      utils::plan_for_limit(chain, h);
      ADD_FAILURE() << "a limit below the smallest plan was expected to be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[plan_for_limit] no checkpointing fits a step under the limit of"),
                std::string::npos)
          << e.what();
      smallest_limit = bytes_after(e.what(), "the smallest limit that would work is ");
    }
  }
  ASSERT_GT(smallest_limit, 0);
  const LimitGuard guard(smallest_limit);
  EXPECT_NO_THROW(utils::plan_for_limit(chain, h));
}

TEST(LimitPlan, APlainStepUnderALimitFailsWithTheAdviceAndThenTrainsWithIt) {
  int64_t base = 0;
  const StepResult reference = plain_run(gpt_trial, base);
  memory::empty_cache();
  Trial s = gpt_trial();
  const LimitGuard guard(base + reference.peak * 2 / 5);
  // none: the step is measured for the error's advice.
  const examples::Forward forward = examples::checkpointed_forward(*s.parts, {"none", 0, 0}, s.x);
  const MemoryStats before = memory::stats();
  const memory::LiveByCategory held_before = memory::live_by_category();
  try {
    train_step(s, forward);
    ADD_FAILURE() << "a plain step fit under 0.4 x its peak";
  } catch (const OutOfMemoryError& e) {
    const OutOfMemoryError::Facts& f = e.facts();
    EXPECT_EQ(f.held.total(), f.live_bytes);
    EXPECT_EQ(f.held[MemoryCategory::Parameters], held_before[MemoryCategory::Parameters]);
    EXPECT_GT(f.held[MemoryCategory::SavedForBackward], 0);
    EXPECT_NE(f.phase, "");
    EXPECT_NE(f.op, "");
    EXPECT_NE(f.advice.find("--checkpoint auto"), std::string::npos) << e.what();
    if (f.phase == "forward") {
      EXPECT_EQ(f.module.rfind("blocks.", 0), 0u) << f.module;
    }
    EXPECT_FALSE(f.held.saved_by_module.empty());
  }
  // Nothing of the failed step is left once the gradients it made are let go, as a program that
  // goes on does.
  s.optimizer->zero_grad();
  EXPECT_EQ(memory::stats().live_bytes, before.live_bytes);
  EXPECT_EQ(memory::live_by_category().bytes, held_before.bytes);
  // The advice, under the same limit: the step trains, with the plain step's gradients.
  const examples::Forward planned = examples::checkpointed_forward(*s.parts, auto_mode(s), s.x);
  EXPECT_EQ(train_step(s, planned), reference.grads);
}

}  // namespace
