// Checkpointing's memory savings, measured exactly with the allocator's statistics, and the
// budget planner and memory timeline built on them. The model is a stack of Linear + ReLU layers
// on a batch much larger than the width, so activations dominate parameters (as in the
// checkpoint_demo sweep, scaled down to run in a test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "core/allocator.h"
#include "core/generator.h"
#include "nn/nn.h"
#include "utils/checkpoint_sequential.h"
#include "utils/memory_timeline.h"
#include "utils/op_planner.h"
#include "utils/planner.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;

namespace {

constexpr int64_t kBatch = 1024, kWidth = 32;
constexpr int64_t kActivation = kBatch * kWidth * 4;  // bytes of one layer's output

void build_stack(nn::Sequential& seq, int layers) {
  for (int i = 0; i < layers; ++i) {
    seq.add<nn::Linear>(kWidth, kWidth);
    seq.add<nn::ReLU>();
  }
}

int64_t parameter_bytes(nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += static_cast<int64_t>(p.nbytes());
  return n;
}

struct Measured {
  int64_t after_forward;  // live bytes the forward leaves for backward (above the input)
  int64_t peak;           // peak over forward and backward
};

// segments == 0: no checkpointing.
Measured measure(nn::Sequential& seq, const Tensor& x, int64_t segments) {
  seq.zero_grad();
  const int64_t base = memory::stats().live_bytes;
  memory::reset_peak();
  Tensor out = segments == 0 ? seq(x) : utils::checkpoint_sequential(seq, segments, x);
  const int64_t after_forward = memory::stats().live_bytes - base;
  sum(out).backward();
  return {after_forward, memory::stats().peak_bytes - base};
}

class CheckpointMemory : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(0); }
};

}  // namespace

TEST_F(CheckpointMemory, FourSegmentsOfSixteenLayersDropNineActivations) {
  nn::Sequential seq;
  build_stack(seq, 16);
  Tensor x = randn({kBatch, kWidth});
  Measured plain = measure(seq, x, 0), ckpt = measure(seq, x, 4);
  // Plain: every layer's ReLU output stays saved (16). Four segments of 4 layers: the three
  // checkpointed ones keep only their outputs (3), the last runs plainly (4): 9 are dropped.
  EXPECT_EQ(plain.after_forward, 16 * kActivation);
  EXPECT_EQ(ckpt.after_forward, 7 * kActivation);
  const int64_t dropped = plain.after_forward - ckpt.after_forward;
  // The peak falls by the dropped activations, up to the parameter gradients, which both runs
  // allocate during backward but at different moments relative to their peaks.
  EXPECT_GE(plain.peak - ckpt.peak, dropped - parameter_bytes(seq))
      << "plain peak " << plain.peak << ", checkpointed peak " << ckpt.peak;
  EXPECT_LT(ckpt.peak, plain.peak);
}

TEST_F(CheckpointMemory, PeakGrowsLikeSqrtOfDepth) {
  // docs/checkpointing.md: with S segments over L layers, the forward leaves S - 1 segment
  // outputs plus the last segment's L - (S - 1) L / S layers, i.e. S - 1 + L / S activations,
  // smallest at S = sqrt(L) where it is 2 sqrt(L) - 1. Backward adds a working set T that does
  // not depend on L (measured from the plain run as peak - L activations) and the parameter
  // gradients.
  nn::Sequential s16, s64;
  build_stack(s16, 16);
  build_stack(s64, 64);
  Tensor x = randn({kBatch, kWidth});
  Measured plain16 = measure(s16, x, 0), plain64 = measure(s64, x, 0);
  Measured ckpt16 = measure(s16, x, 4), ckpt64 = measure(s64, x, 8);
  EXPECT_EQ(ckpt64.after_forward, (8 - 1 + 64 / 8) * kActivation);
  const int64_t working_set = plain64.peak - 64 * kActivation;
  EXPECT_LE(ckpt64.peak, (8 - 1 + 64 / 8) * kActivation + working_set + parameter_bytes(s64));
  // 4x the depth: the plain peak grows about 4x, the checkpointed one about 2x = sqrt(4).
  const double plain_growth = static_cast<double>(plain64.peak) / static_cast<double>(plain16.peak);
  const double ckpt_growth = static_cast<double>(ckpt64.peak) / static_cast<double>(ckpt16.peak);
  EXPECT_GT(plain_growth, 3.0);
  EXPECT_LT(ckpt_growth, 2.2);
  std::printf("peak growth from 16 to 64 layers: plain %.2fx, sqrt(N) segments %.2fx\n", plain_growth, ckpt_growth);
}

// Note [Checkpoint planning]'s model on a profile small enough to check by hand: three modules of
// 10 bytes of activations each. Module 1's output is saved by nothing, module 2 saves nothing.
TEST_F(CheckpointMemory, PlannerModelByHand) {
  //                            name live out saved saves fwd_peak bwd_peak flops ms first_use
  const std::vector<utils::LayerProfile> profile = {{"0", 10, 10, true, true, 10, 25, 4, 0.0, 15},
                                                    {"1", 20, 10, false, true, 25, 22, 6, 0.0, 21},
                                                    {"2", 30, 10, true, false, 30, 45, 5, 0.0, 45}};
  // No checkpointing: the largest peak the profile measured. Cutting the plain run into pieces
  // does not change it.
  EXPECT_EQ(utils::predicted_peak(profile, {{{0, 3, false}}}), 45);
  EXPECT_EQ(utils::predicted_peak(profile, {{{0, 1, false}, {1, 3, false}}}), 45);
  // [0,2) checkpointed keeps 10 bytes. Its recompute runs when backward first uses a tensor module
  // 1 saved: the forward up to module 1 (peak 25) on top of what backward holds then, 21 - (20 -
  // 10) = 11: 36. (With module 1's backward peak, 22, in place of 21 it would be 37.) Module 2's
  // backward then has 10 kept where the plain step had 20: 45 - 20 + 10 = 35.
  EXPECT_EQ(utils::predicted_peak(profile, {{{0, 2, true}, {2, 3, false}}}), 36);
  // Checkpointing module 2 alone: its input (module 1's output) is held by the checkpoint, while
  // the plain step had freed it: 20 + 10 + (45 - 20) = 55, more than no checkpointing.
  EXPECT_EQ(utils::predicted_peak(profile, {{{0, 2, false}, {2, 3, true}}}), 55);
  // 36 is the least any plan needs; its recompute is the work of modules 0 and 1.
  const utils::CheckpointPlan plan = utils::plan_checkpoints(profile, 40);
  EXPECT_EQ(plan.str(), "[0,2) ckpt | [2,3) plain");
  EXPECT_EQ(plan.predicted_peak_bytes, 36);
  EXPECT_EQ(plan.recompute_flops, 4 + 6);
  EXPECT_EQ(utils::min_feasible_budget(profile), 36);
  EXPECT_THROW(utils::plan_checkpoints(profile, 35), Error);
  // A budget the plain step fits recomputes nothing.
  EXPECT_EQ(utils::plan_checkpoints(profile, 45).str(), "[0,3) plain");
  EXPECT_THROW(utils::predicted_peak(profile, {{{0, 2, false}}}), Error);  // a plan that does not cover the model
  // A hand-made profile is checked before the planner adds its numbers: counts only, and totals
  // far from int64's end (three layers of INT64_MAX / 2 bytes would overflow the sums).
  std::vector<utils::LayerProfile> bad = profile;
  bad[1].output_bytes = -10;
  expect_error([&] { utils::plan_checkpoints(bad, 40); },
               "[plan_checkpoints] layer 1 ('1') has a negative byte count or work (-10)");
  bad = profile;
  for (utils::LayerProfile& m : bad) m.live_after = m.forward_peak = m.backward_peak = INT64_MAX / 2;
  expect_error([&] { utils::min_feasible_budget(bad); }, "add up to more than 2^60 bytes or operations");
  bad = profile;
  bad[2].forward_ms = std::nan("");
  expect_error([&] { utils::predicted_peak(bad, plan); }, "layer 2 ('2') has a forward time of nan ms");

  // Module 1 saving its own output (as a ReLU does): at its first use the plain step still holds
  // all of L(1), not L(1) less the output, so the recompute adds 25 to 21 - 20 = 1: 26. Module 2's
  // backward, 35, is now the peak.
  std::vector<utils::LayerProfile> saves_output = profile;
  saves_output[1].output_saved = true;
  EXPECT_EQ(utils::predicted_peak(saves_output, {{{0, 2, true}, {2, 3, false}}}), 36);
  saves_output[1].saves_own_output = true;
  EXPECT_EQ(utils::predicted_peak(saves_output, {{{0, 2, true}, {2, 3, false}}}), 35);
  // The last module's output is held by the caller in both steps: its own save frees nothing.
  saves_output[2].saves = saves_output[2].saves_own_output = true;
  EXPECT_EQ(utils::predicted_peak(saves_output, {{{0, 3, true}}}), 30 + 45 - 30 + 10);
}

namespace {

// Peak of one training step that runs the plan (the demo's step: zero_grad, forward, sum, backward).
int64_t measured_peak(nn::Sequential& seq, const utils::CheckpointPlan& plan, const Tensor& x) {
  seq.zero_grad();
  const int64_t base = memory::stats().live_bytes;
  memory::reset_peak();
  Tensor out = utils::run_plan(seq, plan, x);
  sum(out).backward();
  return memory::stats().peak_bytes - base;
}

// For budgets from the smallest feasible one to what no checkpointing needs, the measured peak of
// the planned step stays within the budget and within the prediction. The prediction is an upper
// bound (Note [Checkpoint planning]); `margin` is how much it may overcount, per model.
void expect_plans_fit(nn::Sequential& seq, const Tensor& x, int64_t margin) {
  const std::vector<utils::LayerProfile> profile = utils::profile_layers(seq, x);
  const int64_t smallest = utils::min_feasible_budget(profile);
  const utils::CheckpointPlan plain{{{0, seq.size(), false}}};
  const int64_t plain_peak = utils::predicted_peak(profile, plain);
  ASSERT_LT(smallest, plain_peak) << "checkpointing should save memory on this model";
  EXPECT_LE(measured_peak(seq, plain, x), plain_peak);
  bool checkpointed_some = false;
  for (int quarter = 0; quarter <= 4; ++quarter) {
    const int64_t budget = smallest + (plain_peak - smallest) * quarter / 4;
    const utils::CheckpointPlan plan = utils::plan_checkpoints(profile, budget);
    const int64_t measured = measured_peak(seq, plan, x);
    std::printf("budget %lld: plan %s, predicted %lld, measured %lld\n", static_cast<long long>(budget),
                plan.str().c_str(), static_cast<long long>(plan.predicted_peak_bytes),
                static_cast<long long>(measured));
    EXPECT_LE(plan.predicted_peak_bytes, budget);
    EXPECT_LE(measured, budget) << plan.str();
    EXPECT_LE(measured, plan.predicted_peak_bytes) << plan.str();
    EXPECT_GE(measured, plan.predicted_peak_bytes - margin) << plan.str();
    for (const auto& s : plan.segments) checkpointed_some |= s.checkpointed;
  }
  EXPECT_TRUE(checkpointed_some);
}

// A small ResNet-like stack: convolutions, BatchNorm, residual blocks with a strided projection,
// a Flatten that saves nothing, and one Linear much wider than the rest.
void build_residual_net(nn::Sequential& seq) {
  seq.add<nn::Conv2d>(nn::Conv2dOptions(3, 8, 3).padding(1));
  seq.add<nn::BatchNorm2d>(8);
  seq.add<nn::ReLU>();
  seq.add<nn::BasicBlock>(8, 8);
  seq.add<nn::BasicBlock>(8, 8);
  seq.add<nn::BasicBlock>(8, 16, 2);
  seq.add<nn::Flatten>();
  seq.add<nn::Linear>(16 * 8 * 8, 512);
  seq.add<nn::GELU>();
  seq.add<nn::Linear>(512, 10);
}

}  // namespace

TEST_F(CheckpointMemory, PlannedStepsStayWithinTheBudgetOnALinearStack) {
  nn::Sequential seq;
  build_stack(seq, 16);
  Tensor x = randn({kBatch, kWidth});
  // The prediction overcounts the output of a checkpointed segment that the next module does not
  // save, and what backward holds when a recompute runs: by less than one activation here.
  expect_plans_fit(seq, x, kActivation);
}

// Note [Checkpoint planning]: a ReLU's output is held by its own save until its backward, so a
// checkpoint of it frees that; except at the end of the chain, where the caller holds it as well
// and the recompute makes a second copy. Measured here, the bound holds for a plan ending there
// too; PlannerModelByHand pins the last module's term exactly.
TEST_F(CheckpointMemory, TheBoundCountsAReluOutputOnceExceptAtTheEnd) {
  nn::Sequential seq;
  build_stack(seq, 4);
  Tensor x = randn({kBatch, kWidth});
  const std::vector<utils::LayerProfile> profile = utils::profile_layers(seq, x);
  for (const utils::CheckpointPlan& plan : {utils::CheckpointPlan{{{0, 4, true}, {4, 8, false}}},
                                            utils::CheckpointPlan{{{0, 4, false}, {4, 8, true}}},
                                            utils::CheckpointPlan{{{0, 8, true}}}}) {
    SCOPED_TRACE(plan.str());
    const int64_t predicted = utils::predicted_peak(profile, plan), measured = measured_peak(seq, plan, x);
    EXPECT_LE(measured, predicted);
    EXPECT_GE(measured, predicted - kActivation);
  }
  // The first: exactly what it measures, where counting the ReLU's output as freed by the plain
  // step overcounted it by one activation.
  const utils::CheckpointPlan first{{{0, 4, true}, {4, 8, false}}};
  EXPECT_EQ(utils::predicted_peak(profile, first), measured_peak(seq, first, x));
}

TEST_F(CheckpointMemory, PlannedStepsStayWithinTheBudgetOnAResidualNet) {
  // The lower bound below (the plan within `margin` of the measured peak) is tuned to the im2col
  // kernel's transient columns; oneDNN's scratch is smaller, so there the plan still bounds the
  // peak but less tightly.
  const testutil::ReferenceConvScope reference;
  nn::Sequential seq;
  build_residual_net(seq);
  Tensor x = randn({16, 3, 16, 16});
  const int64_t activation = 16 * 8 * 16 * 16 * 4;  // one feature map of the first blocks
  // Overcounted by half of one: a checkpointed segment ending at the last block keeps its output
  // in the model, but Flatten does not save it, so the step frees it.
  expect_plans_fit(seq, x, activation);
}

TEST_F(CheckpointMemory, ProfileMeasuresAStepAndLeavesNoTrace) {
  nn::Sequential seq;
  build_stack(seq, 4);
  Tensor x = randn({kBatch, kWidth});
  Tensor grad_before = ones({kWidth, kWidth});
  seq[0].parameters()[0].set_grad(grad_before);
  const int64_t live_before = memory::stats().live_bytes;
  const std::vector<utils::LayerProfile> profile = utils::profile_layers(seq, x);
  EXPECT_EQ(memory::stats().live_bytes, live_before);  // the profile's gradients are gone
  EXPECT_TRUE(seq[0].parameters()[0].grad().is_same(grad_before));
  EXPECT_FALSE(seq[2].parameters()[0].grad().defined());
  ASSERT_EQ(profile.size(), 8u);
  EXPECT_EQ(profile.back().live_after, 4 * kActivation);  // the ReLUs' outputs
  EXPECT_FALSE(profile[0].output_saved);  // a Linear's output: ReLU saves its own output instead
  EXPECT_TRUE(profile[1].output_saved);
  EXPECT_TRUE(profile[0].saves && profile[1].saves);
  EXPECT_EQ(profile[0].forward_flops, 2 * kBatch * kWidth * kWidth + kBatch * kWidth);  // matmul, bias add
  // A ReLU is bound by its bytes (Note [Work of an op]): 6 operations per byte of its input and output.
  EXPECT_EQ(profile[1].forward_flops, 6 * 2 * kActivation);
  // Backward in the last module holds everything the forward kept and the incoming gradient.
  EXPECT_GE(profile.back().backward_peak, profile.back().live_after + kActivation);
  // The last ReLU's saved output is used as soon as the gradient arrives: what the forward kept,
  // the dense gradient, and the profile's scalar loss and its seed.
  EXPECT_EQ(profile.back().live_at_first_use, profile.back().live_after + kActivation + 2 * 4);
  for (size_t i = 0; i < profile.size(); ++i) {
    SCOPED_TRACE(i);
    // Before its first use nothing the module kept was let go (Note [Checkpoint planning]), and the
    // backward peak in the module comes at that moment or later.
    EXPECT_GE(profile[i].live_at_first_use, profile[i].live_after - profile[i].output_bytes);
    EXPECT_LE(profile[i].live_at_first_use, profile[i].backward_peak);
    // A ReLU saves its output, which is then alive when its backward starts; a Linear saves its
    // input and weight.
    EXPECT_EQ(profile[i].saves_own_output, i % 2 == 1);
    if (profile[i].saves_own_output) {
      EXPECT_GE(profile[i].live_at_first_use, profile[i].live_after);
    }
  }
}

TEST_F(CheckpointMemory, PlansAreTheSameOnEveryRun) {
  nn::Sequential seq;
  build_residual_net(seq);
  Tensor x = randn({16, 3, 16, 16});
  const std::vector<utils::LayerProfile> first = utils::profile_layers(seq, x), second = utils::profile_layers(seq, x);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].live_after, second[i].live_after);
    EXPECT_EQ(first[i].forward_peak, second[i].forward_peak);
    EXPECT_EQ(first[i].backward_peak, second[i].backward_peak);
    EXPECT_EQ(first[i].forward_flops, second[i].forward_flops);
  }
  const int64_t smallest = utils::min_feasible_budget(first);
  EXPECT_EQ(utils::min_feasible_budget(second), smallest);
  for (const int64_t budget : {smallest, smallest + smallest / 8, smallest + smallest / 4}) {
    const utils::CheckpointPlan a = utils::plan_checkpoints(first, budget), b = utils::plan_checkpoints(second, budget);
    EXPECT_EQ(a.str(), b.str());
    EXPECT_EQ(a.predicted_peak_bytes, b.predicted_peak_bytes);
    EXPECT_EQ(a.recompute_flops, b.recompute_flops);
  }
}

TEST_F(CheckpointMemory, PlannerRefusesABudgetItCannotMeet) {
  nn::Sequential seq;
  build_stack(seq, 16);
  Tensor x = randn({kBatch, kWidth});
  const std::vector<utils::LayerProfile> profile = utils::profile_layers(seq, x);
  const int64_t smallest = utils::min_feasible_budget(profile);
  try {
    utils::plan_checkpoints(profile, smallest - 1);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the smallest feasible budget for this model and input is"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(" + std::to_string(smallest) + " bytes)"), std::string::npos) << e.what();
  }
  const utils::CheckpointPlan plan = utils::plan_checkpoints(profile, smallest);
  EXPECT_LE(measured_peak(seq, plan, x), smallest);
  // Gradients through a planned run equal the plain ones (the input's gradient is part of the step
  // now, so the profile is taken again).
  Tensor xg = x.detach().requires_grad_();
  sum(seq(xg)).backward();
  std::vector<float> plain_grad = xg.grad().to_vector<float>();
  xg.set_grad(Tensor());
  const int64_t smallest_with_input_grad = utils::min_feasible_budget(utils::profile_layers(seq, xg));
  sum(utils::checkpoint_sequential(seq, utils::MemoryBudget{smallest_with_input_grad}, xg)).backward();
  EXPECT_EQ(xg.grad().to_vector<float>(), plain_grad);
}

TEST_F(CheckpointMemory, TimelineRecordsForwardBackwardAndRecompute) {
  nn::Sequential seq;
  build_stack(seq, 4);
  Tensor x = randn({kBatch, kWidth});
  std::vector<utils::MemoryEvent> events;
  {
    utils::MemoryTimeline timeline;
    sum(utils::checkpoint_sequential(seq, 2, x)).backward();
    timeline.stop();
    events = timeline.events();
    EXPECT_GT(timeline.peak_bytes(), 0);
  }
  bool forward = false, backward = false, recompute = false, backward_matmul = false;
  for (const auto& e : events) {
    forward |= !e.backward && !e.recomputing && e.op != nullptr;
    backward |= e.backward;
    recompute |= e.recomputing;
    // the ops a node's backward runs (matmul for Linear's gradients) are labelled backward too
    backward_matmul |= e.backward && e.op != nullptr && std::string(e.op) == "matmul";
  }
  EXPECT_TRUE(forward && backward && recompute && backward_matmul);
  std::string svg = utils::timeline_svg({{"2 segments", events}}, "test");
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("#fbd9b0"), std::string::npos);  // the recompute shading
}

// Note [Planning per-op saves]: on blocks of Linear(32, 128), GELU, Linear(128, 32), keeping a
// block's first matmul output (four activations) spares nearly all of the block's recompute,
// where making the block plain costs that and the GELU's output too. So once the budget leaves
// four activations, plan_selective keeps such outputs and recomputes less than the segment plan
// alone; the step measures within the prediction, which is within the budget, and its gradients
// are the plain step's.
TEST_F(CheckpointMemory, SelectivePlansKeepOpsWhereTheyBeatSegments) {
  nn::Sequential seq;
  for (int i = 0; i < 8; ++i) {
    auto& block = seq.add<nn::Sequential>();
    block.add<nn::Linear>(kWidth, 4 * kWidth);
    block.add<nn::GELU>();
    block.add<nn::Linear>(4 * kWidth, kWidth);
  }
  Tensor x = randn({kBatch, kWidth});
  seq.zero_grad();
  sum(seq(x)).backward();
  std::vector<std::vector<double>> plain;
  for (const Tensor& p : seq.parameters()) plain.push_back(testutil::values(p.grad()));
  const int64_t smallest = utils::min_feasible_budget(utils::profile_layers(seq, x));
  for (const int64_t budget : {smallest + 5 * kActivation, smallest + 12 * kActivation}) {
    const utils::SelectivePlan plan = utils::plan_selective(seq, x, budget);
    int64_t kept = 0, saved = 0;
    for (const utils::OpPlan& p : plan.ops) {
      kept += p.kept_bytes;
      saved += p.saved_flops;
    }
    EXPECT_GT(saved, 0) << plan.str();
    EXPECT_EQ(plan.predicted_peak_bytes, plan.segments.predicted_peak_bytes + kept);
    EXPECT_LE(plan.predicted_peak_bytes, budget) << plan.str();
    // It recomputes less than the segment plan for the budget alone, counted the same way.
    const utils::CheckpointPlan alone = utils::plan_checkpoints(utils::profile_layers(seq, x), budget);
    int64_t alone_flops = 0;
    for (const auto& s : alone.segments)
      if (s.checkpointed)
        alone_flops += utils::plan_op_saves(utils::profile_ops(
                                                [&](const std::vector<Tensor>& in) {
                                                  Tensor h = in[0];
                                                  for (size_t i = s.begin; i < s.end; ++i) h = seq[i](h);
                                                  return std::vector<Tensor>{h};
                                                },
                                                {s.begin == 0 ? x : x.detach().requires_grad_()}),
                                            0)
                           .recompute_flops;
    EXPECT_LT(plan.recompute_flops, alone_flops) << plan.str() << " against " << alone.str();
    seq.zero_grad();
    utils::checkpoint_stats() = {};
    const int64_t base = memory::stats().live_bytes;
    memory::reset_peak();
    sum(utils::run_plan(seq, plan, x)).backward();
    const int64_t measured = memory::stats().peak_bytes - base;
    std::printf("budget %lld: %s, predicted %lld, measured %lld\n", static_cast<long long>(budget), plan.str().c_str(),
                static_cast<long long>(plan.predicted_peak_bytes), static_cast<long long>(measured));
    EXPECT_LE(measured, plan.predicted_peak_bytes) << plan.str();
    EXPECT_GT(utils::checkpoint_stats().ops_replayed, 0);
    std::vector<std::vector<double>> got;
    for (const Tensor& p : seq.parameters()) got.push_back(testutil::values(p.grad()));
    EXPECT_EQ(got, plain) << plan.str();
  }
}

namespace {

// The least recompute of all plans whose prediction fits `budget`: every way to cut seq's modules
// into segments, each plain or checkpointed, with the best kept ops for what the segments leave
// of the budget (one exact knapsack over all the checkpointed regions).
int64_t optimum_by_trying_everything(nn::ModuleList& seq, const Tensor& x, const std::vector<utils::LayerProfile>& profile,
                                     int64_t budget) {
  std::vector<Tensor> inputs{x};
  for (size_t i = 0; i + 1 < seq.size(); ++i) inputs.push_back(seq[i](inputs.back()).detach().requires_grad_());
  std::map<std::pair<size_t, size_t>, std::vector<utils::OpInfo>> regions_of;
  auto ops_of = [&](utils::CheckpointPlan::Segment s) -> const std::vector<utils::OpInfo>& {
    std::vector<utils::OpInfo>& ops = regions_of[{s.begin, s.end}];
    if (ops.empty()) {
      const auto forward = utils::segment_forward(seq, s);
      ops = utils::profile_ops([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{forward(in[0])}; },
                               {inputs[s.begin]});
    }
    return ops;
  };
  const size_t n = seq.size();
  int64_t optimum = std::numeric_limits<int64_t>::max();
  for (unsigned cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    std::vector<utils::CheckpointPlan::Segment> segments{{0, 0, false}};
    for (size_t i = 0; i < n; ++i) {
      segments.back().end = i + 1;
      if (i + 1 < n && (cuts >> i & 1u)) segments.push_back({i + 1, i + 1, false});
    }
    for (unsigned flags = 0; flags < (1u << segments.size()); ++flags) {
      utils::CheckpointPlan plan;
      std::vector<std::vector<utils::OpInfo>> regions;
      for (size_t s = 0; s < segments.size(); ++s) {
        plan.segments.push_back({segments[s].begin, segments[s].end, (flags >> s & 1u) != 0});
        if (plan.segments.back().checkpointed) regions.push_back(ops_of(plan.segments.back()));
      }
      const int64_t predicted = utils::predicted_peak(profile, plan);
      if (predicted > budget) continue;
      int64_t recompute = 0;
      for (const utils::OpPlan& p : utils::plan_op_saves(regions, budget - predicted)) recompute += p.recompute_flops;
      optimum = std::min(optimum, recompute);
    }
  }
  return optimum;
}

// plan_selective against the optimum at nine budgets from the smallest feasible one to a plain
// step's prediction.
void expect_the_optimum(nn::ModuleList& seq, const Tensor& x) {
  const std::vector<utils::LayerProfile> profile = utils::profile_layers(seq, x);
  const int64_t smallest = utils::min_feasible_budget(profile);
  const int64_t plain = utils::predicted_peak(profile, utils::CheckpointPlan{{{0, seq.size(), false}}});
  for (int step = 0; step <= 8; ++step) {
    const int64_t budget = smallest + (plain - smallest) * step / 8;
    const int64_t optimum = optimum_by_trying_everything(seq, x, profile, budget);
    const utils::SelectivePlan selective = utils::plan_selective(seq, x, budget);
    EXPECT_LE(selective.predicted_peak_bytes, budget);
    EXPECT_GE(selective.recompute_flops, optimum);  // nothing beats trying everything
    EXPECT_LE(selective.recompute_flops * 100, optimum * 105) << "budget " << budget << ": " << selective.str();
    std::printf("budget %lld: plan_selective recomputes %lld, the optimum %lld (%+.1f%%)\n",
                static_cast<long long>(budget), static_cast<long long>(selective.recompute_flops),
                static_cast<long long>(optimum),
                optimum > 0 ? 100.0 * static_cast<double>(selective.recompute_flops - optimum) / static_cast<double>(optimum)
                            : 0.0);
  }
}

}  // namespace

// Note [Planning per-op saves]: plan_selective searches in two stages, the segment plans that the
// segment planner makes for falling budgets and one knapsack over kept ops for each, not every
// combination of segments and kept ops, so it is not exact by construction. Trying every
// combination on five blocks of two kinds and on five transformer blocks, at nine budgets each,
// measures the gap to the model's optimum: none on the first, 3.3% and 3.7% at two budgets of the
// second, 0 at the others (docs/checkpointing.md section 10). The test holds it within 5%.
TEST_F(CheckpointMemory, SelectivePlansAreWithinFivePercentOfEveryCombination) {
  nn::Sequential mixed;
  for (int i = 0; i < 5; ++i) {
    auto& block = mixed.add<nn::Sequential>();
    if (i % 2 == 0) {
      block.add<nn::Linear>(kWidth, 4 * kWidth);
      block.add<nn::GELU>();
      block.add<nn::Linear>(4 * kWidth, kWidth);
    } else {
      block.add<nn::Linear>(kWidth, kWidth);
      block.add<nn::ReLU>();
    }
  }
  expect_the_optimum(mixed, randn({kBatch, kWidth}));
  nn::Sequential transformer;
  for (int i = 0; i < 5; ++i) transformer.add<nn::TransformerBlock>(16, 2);
  expect_the_optimum(transformer, randn({4, 16, 16}));
}
