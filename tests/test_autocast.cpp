// autocast (Note [Autocast] in core/autocast.h): the output dtype of every op of the op table
// under CPU autocast against PyTorch 2.15's (tests/fixtures/autocast_cpu_dtypes.txt, written by
// make_autocast_fixtures.py), regions nesting and turning off, thread-locality, the cast cache
// and the dtype of the gradients; batch norm on 16-bit inputs with float32 statistics; and
// checkpointing under it: checkpoint, checkpoint_sequential, the policies and the planner.
#include <gtest/gtest.h>

#include <thread>

#include "core/autocast.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "tests/op_table.h"
#include "tests/test_helpers.h"
#include "utils/checkpoint.h"
#include "utils/checkpoint_sequential.h"
#include "utils/layer_profile.h"
#include "utils/planner.h"

using namespace ember;

namespace {

TEST(Autocast, EveryOpsOutputDtypeIsPyTorchs) {
  testutil::expect_autocast_dtypes("autocast_cpu_dtypes.txt", kCPU,
                                   {{{kFloat32, kBFloat16}, {kFloat32, kFloat16}, {kBFloat16, kBFloat16}}});
}

TEST(Autocast, RegionsNestTurnOffAndStayOnTheirThread) {
  const Tensor a = randn({2, 3}), b = randn({3, 4});
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
  {
    Autocast outer(DeviceType::CPU);
    EXPECT_TRUE(is_autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), kBFloat16);  // the CPU's default
    EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
    {
      Autocast off(DeviceType::CPU, std::nullopt, false);
      EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
      Autocast half(DeviceType::CPU, kFloat16);
      EXPECT_EQ(matmul(a, b).dtype(), kFloat16);
    }
    EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
    DType other_thread = kBFloat16;
    std::thread([&] { other_thread = matmul(a, b).dtype(); }).join();
    EXPECT_EQ(other_thread, kFloat32);
    // float64 stays float64; an op off the table keeps its inputs' dtype.
    EXPECT_EQ(matmul(a.to(kFloat64), b.to(kFloat64)).dtype(), kFloat64);
    EXPECT_EQ(relu(a).dtype(), kFloat32);
    EXPECT_EQ(relu(matmul(a, b)).dtype(), kBFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  testutil::expect_error([] { Autocast bad(DeviceType::CPU, kFloat32); },
                         "[autocast] computes in bfloat16 or float16, got float32");
}

// A weight used by several ops converts once a region (Note [Autocast]); its gradient comes back
// in float32, the sum of the uses' gradients.
TEST(Autocast, WeightsCastOnceAndTheirGradientsAreFloat32) {
  manual_seed(3);
  const Tensor w = randn({4, 3}).requires_grad_();
  const Tensor x = randn({5, 3});
  Tensor loss;
  {
    Autocast autocast(DeviceType::CPU);
    const Tensor y1 = linear(x, w), y2 = linear(x * 2.0, w);
    EXPECT_EQ(autocast::cached_casts(), 1u);
    EXPECT_EQ(y1.dtype(), kBFloat16);
    loss = mse_loss(y1 + y2, zeros({5, 4}));
    EXPECT_EQ(loss.dtype(), kFloat32);  // the losses compute in float32
  }
  EXPECT_EQ(autocast::cached_casts(), 0u);  // cleared with the outermost region
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  // Within bfloat16's rounding of the float32 gradient.
  const Tensor w32 = w.detach().requires_grad_();
  mse_loss(linear(x, w32) + linear(x * 2.0, w32), zeros({5, 4})).backward();
  EXPECT_LT(max(abs(w.grad() - w32.grad())).item(), 0.05 * max(abs(w32.grad())).item());
}

// A checkpointed block entered under autocast and recomputed in a backward outside the region
// computes in the forward's dtypes: the value check passes and the gradients are bitwise those
// without checkpointing.
TEST(Autocast, CheckpointRecomputesInTheForwardsDtypes) {
  manual_seed(4);
  const Tensor w1 = randn({16, 8}).requires_grad_(), w2 = randn({8, 16}).requires_grad_();
  const Tensor x = randn({6, 8}), target = randn({6, 8});
  // The float32 layer norm after the bfloat16 product mixes dtypes (Note [Mixed-dtype layer norm]).
  const Tensor ln_w = (randn({8}) * 0.1 + 1.0).requires_grad_(), ln_b = randn({8}).requires_grad_();
  auto block = [&](const Tensor& in) {
    return layer_norm(linear(dropout(gelu(linear(in, w1)), 0.3), w2), {8}, ln_w, ln_b);
  };
  auto gradients = [&](bool checkpointed) {
    for (const Tensor& p : {w1, w2, ln_w, ln_b}) p.set_grad(Tensor());
    manual_seed(8);
    Tensor loss;
    {
      Autocast autocast(DeviceType::CPU);
      const Tensor y = checkpointed ? utils::checkpoint(block, x) : block(x);
      EXPECT_EQ(y.dtype(), kBFloat16);
      loss = mse_loss(y, target);
    }
    loss.backward();  // outside the region
    EXPECT_EQ(ln_w.grad().dtype(), kFloat32);
    return std::vector<std::vector<double>>{testutil::values(w1.grad()), testutil::values(w2.grad()),
                                            testutil::values(ln_w.grad()), testutil::values(ln_b.grad())};
  };
  const auto plain = gradients(false);
  const auto checkpointed = gradients(true);
  EXPECT_EQ(checkpointed, plain);
}

// The backward engine runs with autocast off (Note [Autocast]): a float32 product's backward,
// called inside a region, computes its gradients' products in float32, bitwise as outside one.
TEST(Autocast, ABackwardInsideARegionComputesInTheForwardsDtypes) {
  manual_seed(31);
  const Tensor a = randn({16, 32}).requires_grad_(), b = randn({32, 8}).requires_grad_();
  const Tensor g = randn({16, 8});
  matmul(a, b).backward(g);
  const Tensor ga = a.grad().clone(), gb = b.grad().clone();
  a.grad().zero_();
  b.grad().zero_();
  const Tensor y = matmul(a, b);  // float32: outside any region
  {
    Autocast autocast(DeviceType::CPU);
    y.backward(g);
  }
  EXPECT_TRUE(testutil::bitwise_equal(a.grad(), ga));
  EXPECT_TRUE(testutil::bitwise_equal(b.grad(), gb));
}

// Note [Mixed-dtype batch norm]: a bfloat16 or float16 input with float32 weight, bias and running
// statistics computes on the input widened: the output is the float32 result rounded once, the
// statistics and the weight's gradient are bitwise the float32 ones.
TEST(Autocast, BatchNormTakesSixteenBitInputsWithFloat32Statistics) {
  manual_seed(12);
  for (DType dtype : {kBFloat16, kFloat16})
    for (const Shape& shape : {Shape{6, 3, 5}, Shape{4, 3, 7, 9}})
      for (bool training : {true, false}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " " << shape_str(shape)
                                        << (training ? " training" : " eval"));
        const Tensor x16 = randn(shape).to(dtype).requires_grad_();
        const Tensor x32 = x16.detach().to(kFloat32).requires_grad_();
        const Tensor w = rand({3}).requires_grad_(), b = randn({3}).requires_grad_();
        const Tensor w32 = w.detach().requires_grad_(), b32 = b.detach().requires_grad_();
        const Tensor mean16 = randn({3}), var16 = rand({3}) + 0.5;
        const Tensor mean32 = mean16.clone(), var32 = var16.clone();
        const Tensor y16 = batch_norm(x16, mean16, var16, w, b, training, 0.1, 1e-5);
        const Tensor y32 = batch_norm(x32, mean32, var32, w32, b32, training, 0.1, 1e-5);
        EXPECT_EQ(y16.dtype(), dtype);
        EXPECT_TRUE(testutil::bitwise_equal(y16, y32.detach().to(dtype)));
        EXPECT_TRUE(testutil::bitwise_equal(mean16, mean32));
        EXPECT_TRUE(testutil::bitwise_equal(var16, var32));
        const Tensor g = randn(shape).to(dtype);
        y16.backward(g);
        y32.backward(g.to(kFloat32));
        EXPECT_EQ(x16.grad().dtype(), dtype);
        EXPECT_EQ(w.grad().dtype(), kFloat32);
        EXPECT_TRUE(testutil::bitwise_equal(w.grad(), w32.grad()));
        EXPECT_TRUE(testutil::bitwise_equal(b.grad(), b32.grad()));
        EXPECT_TRUE(testutil::bitwise_equal(x16.grad(), x32.grad().to(dtype)));
      }
  // without float32 channel vectors the statistics are the input's dtype (staged through float32)
  const Tensor x = randn({4, 3, 6}).to(kBFloat16);
  const Tensor none;
  const Tensor staged = batch_norm(x.to(kFloat32), none, none, none, none, true, 0.1, 1e-5).to(kBFloat16);
  EXPECT_TRUE(testutil::bitwise_equal(batch_norm(x, none, none, none, none, true, 0.1, 1e-5), staged));
  testutil::expect_error([] { batch_norm(ones({4, 2}, kBFloat16), Tensor(), Tensor(), ones({2}), ones({2}, kFloat64),
                                         true, 0.1, 1e-5); },
                         "bias is float64 but the input is bfloat16 and the other channel vectors are float32");
  testutil::expect_error([] { batch_norm(ones({4, 2}), Tensor(), Tensor(), ones({2}, kBFloat16), Tensor(), true, 0.1,
                                         1e-5); },
                         "weight is bfloat16 but the input is float32");
}

// A model with Dropout (the RNG replay) and BatchNorm (statistics updated once), its forward
// under bfloat16 autocast and its backward outside: checkpoint_sequential, a policy that keeps
// the products, and a planned budget all give bitwise the plain run's gradients and statistics.
TEST(Autocast, CheckpointSequentialPoliciesAndPlansRecomputeInTheForwardsDtypes) {
  struct Run {
    std::vector<Tensor> grads;
    Tensor running_mean;
  };
  const Tensor x = randn({16, 8}), target = randn({16, 8});
  auto run = [&](const std::function<Tensor(nn::Sequential&, const Tensor&)>& forward) {
    manual_seed(21);
    nn::Sequential seq;
    seq.add<nn::Linear>(8, 32);
    seq.add<nn::GELU>();
    seq.add<nn::Dropout>(0.25);
    seq.add<nn::Linear>(32, 32);
    seq.add<nn::BatchNorm1d>(32);
    seq.add<nn::ReLU>();
    seq.add<nn::Linear>(32, 8);
    Tensor loss;
    {
      Autocast autocast(DeviceType::CPU);
      const Tensor y = forward(seq, x);
      EXPECT_EQ(y.dtype(), kBFloat16);
      loss = mse_loss(y, target);
    }
    loss.backward();
    Run out;
    for (const Tensor& p : seq.parameters()) out.grads.push_back(p.grad());
    out.running_mean = seq.named_buffers().at(0).second;
    return out;
  };
  const Run plain = run([](nn::Sequential& seq, const Tensor& in) { return seq.forward(in); });
  utils::CheckpointOptions keep_products;
  keep_products.policy = utils::save_matmuls();
  const std::vector<std::pair<std::string, std::function<Tensor(nn::Sequential&, const Tensor&)>>> ways = {
      {"checkpoint_sequential", [](nn::Sequential& seq, const Tensor& in) {
         return utils::checkpoint_sequential(seq, 3, in);
       }},
      {"save_matmuls", [&](nn::Sequential& seq, const Tensor& in) { return utils::checkpoint(seq, in, keep_products); }},
      {"planned budget", [](nn::Sequential& seq, const Tensor& in) {
         const auto profile = utils::profile_layers(seq, in);
         return utils::run_plan(seq, utils::plan_checkpoints(profile, utils::min_feasible_budget(profile)), in);
       }}};
  for (const auto& [name, forward] : ways) {
    SCOPED_TRACE(name);
    const Run got = run(forward);
    ASSERT_EQ(got.grads.size(), plain.grads.size());
    for (size_t i = 0; i < got.grads.size(); ++i)
      EXPECT_TRUE(testutil::bitwise_equal(got.grads[i], plain.grads[i])) << "parameter " << i;
    EXPECT_TRUE(testutil::bitwise_equal(got.running_mean, plain.running_mean));
  }
}

// The planner's memory model is measured, so under autocast it counts the 16-bit bytes: every
// layer's bfloat16 output is half its float32 one, and, with activations larger than the
// weights' cached casts and the staging's float32 temporaries, the smallest feasible budget
// falls.
TEST(Autocast, TheCheckpointProfileCountsSixteenBitBytes) {
  manual_seed(22);
  nn::Sequential seq;
  for (int i = 0; i < 8; ++i) {
    seq.add<nn::Linear>(64, 64);
    seq.add<nn::GELU>();
  }
  const Tensor x = randn({1024, 64});
  const auto wide = utils::profile_layers(seq, x);
  std::vector<utils::LayerProfile> narrow;
  {
    Autocast autocast(DeviceType::CPU);
    narrow = utils::profile_layers(seq, x);
  }
  ASSERT_EQ(narrow.size(), wide.size());
  for (size_t i = 0; i < wide.size(); ++i) EXPECT_EQ(2 * narrow[i].output_bytes, wide[i].output_bytes) << i;
  EXPECT_LT(utils::min_feasible_budget(narrow), utils::min_feasible_budget(wide));
}

}  // namespace
