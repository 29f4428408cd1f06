// Exercise 4 (exercises/README.md): SGD with momentum, step by step against ember's optim::SGD,
// whose update tests/test_optim.cpp compares with PyTorch's.
#include <gtest/gtest.h>

#include <string>

#include "ex4_sgd_momentum.h"
#include "test_helpers.h"

using namespace ember;
using testutil::values;

namespace {

struct Params {
  Tensor w, b, unused;  // `unused` never gets a gradient: both optimizers must skip it
};

Params make_params() {
  manual_seed(7);
  return {randn({4, 3}, kFloat64).requires_grad_(), randn({3}, kFloat64).requires_grad_(),
          randn({2}, kFloat64).requires_grad_()};
}

// A least-squares loss on a fresh batch for each step (the same batches for both optimizers).
void backward_on_batch(const Params& p, int step) {
  manual_seed(100 + static_cast<uint64_t>(step));
  const Tensor x = randn({5, 4}, kFloat64), y = randn({5, 3}, kFloat64);
  mse_loss(matmul(x, p.w) + p.b, y).backward();
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  testutil::expect_near(got, values(want), 1e-12);
}

struct Case {
  const char* name;
  optim::SGDOptions options;
};

const Case kCases[] = {
    {"momentum", optim::SGDOptions(0.1).momentum(0.9)},
    {"dampening", optim::SGDOptions(0.1).momentum(0.9).dampening(0.3)},
    {"nesterov", optim::SGDOptions(0.05).momentum(0.8).nesterov(true)},
    {"weight decay, maximize", optim::SGDOptions(0.02).momentum(0.5).weight_decay(0.01).maximize(true)},
    {"no momentum", optim::SGDOptions(0.1).weight_decay(0.1)},
};

}  // namespace

// Six steps with each set of options: the parameters and the momentum buffers stay those of
// optim::SGD after every step.
TEST(Exercise4SgdMomentum, MatchesOptimSgd) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Params mine = make_params(), theirs = make_params();
    exercises::MomentumSGD mine_opt({mine.w, mine.b, mine.unused}, c.options);
    optim::SGD theirs_opt({theirs.w, theirs.b, theirs.unused}, c.options);
    for (int step = 0; step < 6; ++step) {
      mine_opt.zero_grad();
      theirs_opt.zero_grad();
      backward_on_batch(mine, step);
      backward_on_batch(theirs, step);
      mine_opt.step();
      theirs_opt.step();
      expect_close(mine.w, theirs.w, "w");
      expect_close(mine.b, theirs.b, "b");
      EXPECT_EQ(values(mine.unused), values(theirs.unused));
      if (c.options.momentum_ != 0.0) {
        const optim::StateDict state = theirs_opt.state_dict();
        expect_close(mine_opt.momentum_buffer(0), state.at("state.0.momentum_buffer"), "buffer of w");
        expect_close(mine_opt.momentum_buffer(1), state.at("state.1.momentum_buffer"), "buffer of b");
      }
      EXPECT_FALSE(mine_opt.momentum_buffer(2).defined()) << "a parameter without a gradient has no buffer";
    }
  }
}

// The buffer starts as the first gradient, not as zeros and not damped: the first step is plain
// SGD whatever the momentum and dampening.
TEST(Exercise4SgdMomentum, TheFirstStepIsPlainSgd) {
  const Params p = make_params();
  const Tensor w_before = p.w.detach().clone();
  exercises::MomentumSGD opt({p.w, p.b}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.5));
  backward_on_batch(p, 0);
  const Tensor grad = p.w.grad().clone();
  opt.step();
  expect_close(p.w, w_before - grad * 0.1, "w after one step");
  expect_close(opt.momentum_buffer(0), grad, "the first buffer");
}

// The update is in place (the parameter keeps its storage and a model's references to it stay
// valid), runs with grad mode on outside, and leaves grad mode as it found it.
TEST(Exercise4SgdMomentum, UpdatesInPlaceAndLeavesGradModeOn) {
  const Params p = make_params();
  exercises::MomentumSGD opt({p.w, p.b}, optim::SGDOptions(0.1).momentum(0.9));
  backward_on_batch(p, 0);
  const void* storage = p.w.raw_data();
  const uint64_t version = p.w.version();
  ASSERT_TRUE(is_grad_enabled());
  opt.step();
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_EQ(p.w.raw_data(), storage);
  EXPECT_GT(p.w.version(), version);
  EXPECT_TRUE(p.w.requires_grad());
  EXPECT_TRUE(p.w.is_leaf()) << "an optimizer step records nothing";
}

TEST(Exercise4SgdMomentum, RejectsBadOptions) {
  const Params p = make_params();
  testutil::expect_error([&] { exercises::MomentumSGD({p.w}, optim::SGDOptions(-1.0)); },
                         "[MomentumSGD] invalid lr -1 (expected a finite lr > 0)");
  testutil::expect_error([&] { exercises::MomentumSGD({p.w}, optim::SGDOptions(0.1).momentum(-0.5)); },
                         "[MomentumSGD] invalid momentum -0.5");
  testutil::expect_error([&] { exercises::MomentumSGD({p.w.detach()}, optim::SGDOptions(0.1)); },
                         "[MomentumSGD] parameter 0 must be a floating point tensor that requires grad");
}
