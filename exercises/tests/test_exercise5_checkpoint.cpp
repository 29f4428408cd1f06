// Exercise 5 (exercises/README.md): a checkpointed segment gives the plain segment's gradients,
// Dropout included, keeps only its inputs after the forward, and lowers the peak of a
// forward + backward, measured by ember's allocator statistics.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ex5_checkpoint.h"
#include "test_helpers.h"

using namespace ember;
using testutil::leaf;
using testutil::values;

namespace {

// tanh(x @ w1 + b1), then Dropout, then @ w2: inputs {x, w1, b1, w2}.
Tensor mlp_segment(const std::vector<Tensor>& in) {
  return matmul(dropout(tanh(matmul(in[0], in[1]) + in[2]), 0.3), in[3]);
}

struct Outcome {
  Tensor y;
  std::vector<Tensor> grads;
  std::vector<std::pair<Device, GeneratorState>> rng_after;
};

// One forward and backward (Dropout drawing from seed 5), with or without checkpointing.
Outcome run_mlp(bool checkpointed, bool x_requires_grad) {
  manual_seed(11);
  std::vector<Tensor> inputs = {randn({6, 4}, kFloat64), randn({4, 8}, kFloat64), randn({8}, kFloat64),
                                randn({8, 3}, kFloat64)};
  for (size_t i = x_requires_grad ? 0 : 1; i < inputs.size(); ++i) inputs[i].requires_grad_();
  manual_seed(5);
  const Tensor y = checkpointed ? exercises::checkpoint_segment(mlp_segment, inputs) : mlp_segment(inputs);
  sum(y * y).backward();
  Outcome run{y.detach(), {}, get_rng_states()};
  for (const Tensor& t : inputs) run.grads.push_back(t.grad());
  return run;
}

void expect_same_runs(const Outcome& got, const Outcome& want) {
  EXPECT_EQ(values(got.y), values(want.y));
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    ASSERT_EQ(got.grads[i].defined(), want.grads[i].defined());
    if (want.grads[i].defined()) {
      EXPECT_EQ(values(got.grads[i]), values(want.grads[i]));
    }
  }
  EXPECT_EQ(got.rng_after, want.rng_after) << "the recompute must leave the generators where they were";
}

}  // namespace

// Bit for bit: the recompute runs the same ops on the same values and draws the same Dropout mask.
TEST(Exercise5Checkpoint, SameGradientsAsThePlainSegment) {
  expect_same_runs(run_mlp(/*checkpointed=*/true, /*x_requires_grad=*/true), run_mlp(false, true));
}

TEST(Exercise5Checkpoint, OnlyTheInputsThatNeedAGradientGetOne) {
  const Outcome run = run_mlp(true, /*x_requires_grad=*/false);
  EXPECT_FALSE(run.grads[0].defined());
  expect_same_runs(run, run_mlp(false, false));
}

TEST(Exercise5Checkpoint, Gradcheck) {
  manual_seed(2);
  const auto segment = [](const std::vector<Tensor>& in) { return tanh(matmul(in[0], in[1])) * in[0].sum(); };
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return exercises::checkpoint_segment(segment, in); },
                   {leaf({3, 4}), leaf({4, 4})});
}

// The inputs go through Ctx::save, so changing one in place before backward is caught.
TEST(Exercise5Checkpoint, AnInputChangedInPlaceIsCaught) {
  manual_seed(3);
  const Tensor x = randn({2, 3}, kFloat64), w = leaf({3, 3});
  const Tensor y = exercises::checkpoint_segment([](const std::vector<Tensor>& in) { return tanh(matmul(in[0], in[1])); },
                                                 {x, w});
  x.mul_(2.0);
  testutil::expect_error([&] { sum(y).backward(); }, "modified in place");
}

// Four segments of four layers tanh(h @ w): activations [256, 32] in float64 (64 KiB each),
// weights [32, 32] (8 KiB, so their gradients do not dominate the peak). After the plain forward
// every layer's tanh output is alive (tanh saves it, the next matmul saves it too, one storage);
// after the checkpointed one only the segments' outputs are, each also the next segment's input.
// The backward then holds one segment's activations at a time.
TEST(Exercise5Checkpoint, KeepsOnlyTheSegmentsOutputsAndLowersThePeak) {
  constexpr int kSegments = 4, kLayers = 4;
  constexpr int64_t kBatch = 256, kWidth = 32, kActivation = kBatch * kWidth * 8;
  manual_seed(4);
  std::vector<Tensor> weights;
  for (int i = 0; i < kSegments * kLayers; ++i) weights.push_back((randn({kWidth, kWidth}, kFloat64) * 0.2).requires_grad_());
  const Tensor x = randn({kBatch, kWidth}, kFloat64);

  struct Measured {
    int64_t after_forward, peak;
    std::vector<Tensor> grads;
  };
  const auto measure = [&](bool checkpointed) {
    for (const Tensor& w : weights) w.set_grad(Tensor());
    const int64_t before = memory::stats().live_bytes;
    memory::reset_peak();
    Measured m{};
    {
      Tensor h = x;
      for (int s = 0; s < kSegments; ++s) {
        std::vector<Tensor> inputs = {h};
        for (int l = 0; l < kLayers; ++l) inputs.push_back(weights[s * kLayers + l]);
        const auto segment = [](const std::vector<Tensor>& in) {
          Tensor a = in[0];
          for (size_t l = 1; l < in.size(); ++l) a = tanh(matmul(a, in[l]));
          return a;
        };
        h = checkpointed ? exercises::checkpoint_segment(segment, inputs) : segment(inputs);
      }
      m.after_forward = memory::stats().live_bytes - before;
      sum(h).backward();
    }
    m.peak = memory::stats().peak_bytes - before;
    for (const Tensor& w : weights) m.grads.push_back(w.grad());
    return m;
  };

  const Measured plain = measure(false), checkpointed = measure(true);
  EXPECT_EQ(plain.after_forward, kSegments * kLayers * kActivation);
  EXPECT_EQ(checkpointed.after_forward, kSegments * kActivation);
  EXPECT_LT(checkpointed.peak, plain.peak);
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(values(checkpointed.grads[i]), values(plain.grads[i])) << i;
}
