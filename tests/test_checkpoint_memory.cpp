// Checkpointing's memory savings, measured exactly with the allocator's statistics, and the
// budget planner and memory timeline built on them. The model is a stack of Linear + ReLU layers
// on a batch much larger than the width, so activations dominate parameters (as in the
// checkpoint_demo sweep, scaled down to run in a test).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "core/generator.h"
#include "nn/nn.h"
#include "utils/checkpoint_sequential.h"
#include "utils/memory_timeline.h"
#include "utils/planner.h"

using namespace ember;

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

// Note [Checkpoint planning]'s model on a profile small enough to check by hand: three layers,
// each adding 10 bytes of activations, whose first and last have 5 bytes of parameter gradients.
TEST_F(CheckpointMemory, PlannerModelCountsParameterGradientsLayerByLayer) {
  const std::vector<utils::LayerProfile> profile = {
      {"0", 10, 10, 5, 1.0}, {"1", 20, 10, 0, 1.0}, {"2", 30, 10, 5, 1.0}};
  // All plain: backward at layer 2 holds all 30 bytes of activations and layer 2's 5 of gradients.
  // Cutting the plain run into pieces does not change the prediction.
  EXPECT_EQ(utils::predicted_peak(profile, {{{0, 3, false}}}), 35);
  EXPECT_EQ(utils::predicted_peak(profile, {{{0, 1, false}, {1, 3, false}}}), 35);
  // [0,2) checkpointed keeps 10 bytes; its recomputed backward peaks at layer 1 (20 bytes of
  // activations + 5 of gradients), and layer 2's backward at 10 + 10 + 5.
  EXPECT_EQ(utils::predicted_peak(profile, {{{0, 2, true}, {2, 3, false}}}), 25);
  // That is the least recompute that fits 25 bytes, and nothing fits 24.
  const utils::CheckpointPlan plan = utils::plan_checkpoints(profile, 25);
  EXPECT_EQ(plan.str(), "[0,2) ckpt | [2,3) plain");
  EXPECT_EQ(plan.predicted_peak_bytes, 25);
  EXPECT_EQ(plan.recompute_ms, 2.0);
  EXPECT_EQ(utils::min_feasible_budget(profile), 25);
}

TEST_F(CheckpointMemory, PlannerFitsTheBudgetWithTheLeastRecompute) {
  nn::Sequential seq;
  build_stack(seq, 16);
  Tensor x = randn({kBatch, kWidth});
  std::vector<utils::LayerProfile> profile = utils::profile_layers(seq, x);
  ASSERT_EQ(profile.size(), 32u);
  EXPECT_EQ(profile.back().live_after, 16 * kActivation);  // same accounting as the plain run
  EXPECT_EQ(profile[0].grad_bytes, parameter_bytes(seq[0]));  // a Linear's weight and bias gradients
  EXPECT_EQ(profile[1].grad_bytes, 0);                        // ReLU has no parameters

  // A budget the plain run fits: nothing is checkpointed.
  utils::CheckpointPlan roomy = utils::plan_checkpoints(profile, 64 * kActivation);
  EXPECT_EQ(roomy.recompute_ms, 0.0);
  for (const auto& s : roomy.segments) EXPECT_FALSE(s.checkpointed);

  // A tight one: the plan fits its prediction and the measured after-forward bytes match it.
  const int64_t budget = 9 * kActivation;
  utils::CheckpointPlan plan = utils::plan_checkpoints(profile, budget);
  EXPECT_LE(plan.predicted_peak_bytes, budget);
  EXPECT_GT(plan.recompute_ms, 0.0);
  seq.zero_grad();
  const int64_t base = memory::stats().live_bytes;
  memory::reset_peak();
  Tensor out = utils::run_plan(seq, plan, x);
  sum(out).backward();
  const int64_t measured = memory::stats().peak_bytes - base;
  std::printf("plan %s: predicted peak %lld, measured %lld (budget %lld)\n", plan.str().c_str(),
              static_cast<long long>(plan.predicted_peak_bytes), static_cast<long long>(measured),
              static_cast<long long>(budget));
  // The model leaves out backward's working set (gradients of one layer at a time).
  const int64_t working_set = 4 * kActivation;
  EXPECT_LE(measured, plan.predicted_peak_bytes + working_set);

  // An impossible budget names the smallest feasible one, and that one is feasible.
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
  EXPECT_NO_THROW(utils::plan_checkpoints(profile, smallest));
  // Gradients through a planned run equal the plain ones.
  Tensor xg = x.detach().requires_grad_();
  sum(seq(xg)).backward();
  std::vector<float> plain_grad = xg.grad().to_vector<float>();
  xg.set_grad(Tensor());
  sum(utils::checkpoint_sequential(seq, utils::MemoryBudget{budget}, xg)).backward();
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
