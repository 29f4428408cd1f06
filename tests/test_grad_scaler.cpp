// GradScaler (Note [Loss scaling] in optim/grad_scaler.h): a run with injected infs against
// PyTorch 2.15's (tests/fixtures/make_grad_scaler_fixtures.py), the fused unscale against the
// composed one, every optimizer stepping through it as on the true gradients, clipping after
// unscale_, float16 autocast training, its state_dict, and the calls it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/grad_unscale.h"
#include "core/ops.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "tests/fixture.h"
#include "tests/test_helpers.h"

using namespace ember;
using testutil::bitwise_equal;
using testutil::expect_error;

namespace {

// The fixture's run: the same parameters, gradients and injected infs, the same scale sequence,
// the same skipped steps and parameters, the same final state.
TEST(GradScaler, MatchesPyTorchOverARunWithInjectedInfs) {
  const auto f = testutil::Fixture::load("grad_scaler.txt");
  const Tensor p0 = f.get("init0").requires_grad_(), p1 = f.get("init1").requires_grad_();
  const Tensor grads0 = f.get("grads0"), grads1 = f.get("grads1");
  const std::vector<double> scales = testutil::values(f.get("scale"));
  const std::vector<double> stepped = testutil::values(f.get("stepped"));
  const std::vector<double> tracker = testutil::values(f.get("tracker"));
  optim::SGD opt({p0, p1}, optim::SGDOptions(0.1).momentum(0.9));
  optim::GradScaler scaler(optim::GradScalerOptions().growth_interval(3));
  for (int64_t s = 0; s < grads0.size(0); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    opt.zero_grad();
    EXPECT_EQ(scaler.get_scale(), scales[static_cast<size_t>(s)]);
    const Tensor loss = sum(p0 * grads0.select(0, s)) + sum(p1 * grads1.select(0, s));
    scaler.scale(loss).backward();
    EXPECT_EQ(scaler.step(opt), stepped[static_cast<size_t>(s)] == 1.0);
    scaler.update();
    EXPECT_EQ(scaler.growth_tracker(), tracker[static_cast<size_t>(s)]);
    EXPECT_LT(max(abs(p0.detach() - f.get("after0").select(0, s))).item(), 1e-6);
    EXPECT_LT(max(abs(p1.detach() - f.get("after1").select(0, s))).item(), 1e-6);
  }
  const optim::StateDict state = scaler.state_dict();
  ASSERT_EQ(state.size(), 5u);
  for (const auto& [key, value] : state) EXPECT_EQ(value.item(), f.get("state." + key).item()) << key;

  // Grown past float32's largest power of two, the scale would be inf: it stays.
  const Tensor q = ones({2}).requires_grad_();
  optim::SGD q_opt({q}, optim::SGDOptions(0.1));
  optim::GradScaler capped(optim::GradScalerOptions().init_scale(std::ldexp(1.0, 127)).growth_interval(1));
  capped.scale(sum(q * 1e-30)).backward();
  EXPECT_TRUE(capped.step(q_opt));
  capped.update();
  EXPECT_EQ(capped.get_scale(), f.get("cap_scale").item());
}

// The fused pass gives what the composed ops give, for every floating dtype, a non-contiguous
// gradient and an empty one; found_inf is raised by an inf or a NaN anywhere and only then.
TEST(GradScaler, TheFusedUnscaleMatchesTheComposedOne) {
  NoGradGuard no_grad;
  manual_seed(2);
  const double inv_scale = 1.0 / 1024.0;
  for (bool poisoned : {false, true}) {
    SCOPED_TRACE(poisoned ? "with a NaN" : "finite");
    std::vector<Tensor> grads = {randn({300, 7}) * 1000.0, randn({5}, kFloat64), randn({9, 4}).to(kBFloat16),
                                 randn({6, 8}).to(kFloat16), randn({8, 6}).transpose(0, 1), zeros({0, 3})};
    if (poisoned) grads[3].select(0, 5).fill_(std::numeric_limits<double>::quiet_NaN());
    std::vector<Tensor> expected;
    for (const Tensor& g : grads) expected.push_back((g.to(g.dtype() == kFloat64 ? kFloat64 : kFloat32) * inv_scale)
                                                         .to(g.dtype()));
    const Tensor found_inf = zeros({1});
    non_finite_check_and_unscale_(grads, found_inf, inv_scale);
    EXPECT_EQ(found_inf.item(), poisoned ? 1.0 : 0.0);
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(bitwise_equal(grads[i], expected[i])) << "gradient " << i;
  }
  const Tensor big = full({200000}, 3.0);  // past the parallel grain
  big.select(0, 199999).fill_(std::numeric_limits<double>::infinity());
  const Tensor found_inf = zeros({1});
  non_finite_check_and_unscale_({big}, found_inf, 0.5);
  EXPECT_EQ(found_inf.item(), 1.0);
  EXPECT_EQ(big.select(0, 0).item(), 1.5);
}

TEST(GradScaler, TheFusedUnscaleRefusesBadArguments) {
  NoGradGuard no_grad;
  const Tensor g = ones({3});
  expect_error([&] { non_finite_check_and_unscale_({g}, zeros({2}), 1.0); }, "found_inf must be a float32 tensor");
  expect_error([&] { non_finite_check_and_unscale_({g}, zeros({1}, kFloat64), 1.0); }, "found_inf must be a float32");
  expect_error([&] { non_finite_check_and_unscale_({ones({3}, kInt64)}, zeros({1}), 1.0); },
               "expected floating gradients");
  expect_error([&] { non_finite_check_and_unscale_({g, g.slice(0, 1, 3)}, zeros({1}), 1.0); },
               "gradients 0 and 1 share memory");
  expect_error([&] { non_finite_check_and_unscale_({g}, zeros({1}), std::nan("")); }, "inv_scale must be finite");
}

// Scaled by a power of two and unscaled again, the gradients are the true ones exactly, so every
// optimizer, fused or composed, steps to bitwise the parameters of an unscaled run.
TEST(GradScaler, EveryOptimizerStepsAsOnTheTrueGradients) {
  using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>&, bool)>;
  const std::vector<std::pair<std::string, MakeOptimizer>> optimizers = {
      {"SGD", [](const std::vector<Tensor>& p, bool fused) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01).fused(fused));
       }},
      {"Adam", [](const std::vector<Tensor>& p, bool fused) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01).amsgrad(true).fused(fused));
       }},
      {"AdamW", [](const std::vector<Tensor>& p, bool fused) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.01).fused(fused));
       }},
      {"RMSprop", [](const std::vector<Tensor>& p, bool fused) {
         return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions(0.01).centered(true).momentum(0.5).fused(fused));
       }},
      {"Adagrad", [](const std::vector<Tensor>& p, bool fused) {
         return std::make_unique<optim::Adagrad>(p, optim::AdagradOptions(0.1).fused(fused));
       }}};
  for (const auto& [name, make] : optimizers)
    for (bool fused : {true, false}) {
      SCOPED_TRACE(name + (fused ? " fused" : " composed"));
      manual_seed(5);
      const Tensor w = randn({6, 4}), x = randn({10, 4}), y = randn({10, 6});
      const Tensor plain_w = w.clone().requires_grad_(), scaled_w = w.clone().requires_grad_();
      auto plain = make({plain_w}, fused);
      auto scaled = make({scaled_w}, fused);
      optim::GradScaler scaler;
      for (int step = 0; step < 3; ++step) {
        plain->zero_grad();
        mse_loss(linear(x, plain_w), y).backward();
        plain->step();
        scaled->zero_grad();
        scaler.scale(mse_loss(linear(x, scaled_w), y)).backward();
        EXPECT_TRUE(scaler.step(*scaled));
        scaler.update();
      }
      EXPECT_TRUE(bitwise_equal(plain_w, scaled_w));
    }
}

// unscale_ first makes the gradients true ones to clip: the same as clipping an unscaled run's.
TEST(GradScaler, ClipsTheTrueGradientsAfterUnscale) {
  manual_seed(6);
  const Tensor w = randn({5, 3}), x = randn({8, 3}), y = randn({8, 5}) * 10.0;
  const Tensor plain_w = w.clone().requires_grad_(), scaled_w = w.clone().requires_grad_();
  mse_loss(linear(x, plain_w), y).backward();
  const double plain_norm = optim::clip_grad_norm_({plain_w}, 0.5).item();

  optim::SGD opt({scaled_w}, optim::SGDOptions(0.1));
  optim::GradScaler scaler;
  scaler.scale(mse_loss(linear(x, scaled_w), y)).backward();
  scaler.unscale_(opt);
  EXPECT_EQ(optim::clip_grad_norm_({scaled_w}, 0.5).item(), plain_norm);
  EXPECT_TRUE(bitwise_equal(scaled_w.grad(), plain_w.grad()));
  EXPECT_TRUE(scaler.step(opt));  // does not unscale a second time
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

// float32 parameters, a float16 forward under autocast, the loss scaled: the loss falls, and the
// float16 gradients that would underflow unscaled come out of the float32 weights.
TEST(GradScaler, TrainsUnderFloat16Autocast) {
  manual_seed(7);
  nn::Sequential model;
  model.add<nn::Linear>(8, 16);
  model.add<nn::ReLU>();
  model.add<nn::Linear>(16, 1);
  const Tensor x = randn({64, 8}), y = sum(x, {1}, true) * 0.25;
  optim::Adam opt(model.parameters(), optim::AdamOptions(0.01));
  optim::GradScaler scaler;
  auto loss_of = [&] {
    Autocast autocast(DeviceType::CPU, kFloat16);
    const Tensor out = model.forward(x);
    EXPECT_EQ(out.dtype(), kFloat16);
    return mse_loss(out, y);
  };
  const double first = loss_of().item();
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    scaler.scale(loss_of()).backward();
    for (const Tensor& p : model.parameters()) EXPECT_EQ(p.grad().dtype(), kFloat32);
    scaler.step(opt);
    scaler.update();
  }
  EXPECT_LT(loss_of().item(), 0.5 * first);
}

// A scaler's state saved mid-run and loaded into a fresh one continues the same scale sequence.
TEST(GradScaler, StateDictResumesTheScaleSequence) {
  const Tensor p = ones({3}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.0));
  auto iteration = [&](optim::GradScaler& scaler, bool overflow) {
    opt.zero_grad();
    scaler.scale(sum(p * (overflow ? std::numeric_limits<double>::infinity() : 1.0))).backward();
    scaler.step(opt);
    scaler.update();
  };
  const auto options = optim::GradScalerOptions().init_scale(8.0).growth_interval(2);
  optim::GradScaler a(options);
  for (bool overflow : {false, true, false}) iteration(a, overflow);
  optim::GradScaler b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.get_scale(), a.get_scale());
  EXPECT_EQ(b.growth_tracker(), 1);
  EXPECT_EQ(b.options().growth_interval_, 2);
  for (bool overflow : {false, false, true, false}) {
    iteration(a, overflow);
    iteration(b, overflow);
    EXPECT_EQ(b.get_scale(), a.get_scale());
  }
  EXPECT_EQ(a.get_scale(), 4.0 * 2.0 * 0.5);
}

TEST(GradScaler, DisabledItStepsAndKeepsNoState) {
  const Tensor p = ones({2}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::GradScaler scaler(optim::GradScalerOptions().enabled(false));
  const Tensor loss = sum(p * 3.0);
  const Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.impl(), loss.impl());
  scaled.backward();
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(p.detach().to_vector<float>(), (std::vector<float>{-2.0f, -2.0f}));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().empty());
}

// bfloat16 gradients are unscaled (the scaler is then only the inf guard); float16 ones are
// refused, as PyTorch refuses them.
TEST(GradScaler, UnscalesBFloat16AndRefusesFloat16Gradients) {
  const Tensor w = ones({4}, kBFloat16).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.5));
  optim::GradScaler scaler;
  scaler.scale(sum(w * 2.0)).backward();
  EXPECT_EQ(w.grad().dtype(), kBFloat16);
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_EQ(w.detach().to_vector<float>(), (std::vector<float>(4, 0.0f)));

  const Tensor h = ones({4}, kFloat16).requires_grad_();
  optim::SGD h_opt({h}, optim::SGDOptions(0.5));
  optim::GradScaler h_scaler;
  h_scaler.scale(sum(h)).backward();
  expect_error([&] { h_scaler.unscale_(h_opt); }, "has a float16 gradient");
}

TEST(GradScaler, RefusesCallsOutOfOrder) {
  const Tensor p = ones({2}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  {
    optim::GradScaler scaler;
    expect_error([&] { scaler.unscale_(opt); }, "unscale_() was called before scale()");
    expect_error([&] { scaler.step(opt); }, "step() was called before scale()");
    expect_error([&] { scaler.update(); }, "update() was called before scale()");
  }
  optim::GradScaler scaler;
  opt.zero_grad();
  scaler.scale(sum(p)).backward();
  expect_error([&] { scaler.update(); }, "no gradients were unscaled since the last update()");
  scaler.unscale_(opt);
  expect_error([&] { scaler.unscale_(opt); }, "unscale_() has already been called on this SGD since the last update()");
  scaler.step(opt);
  expect_error([&] { scaler.unscale_(opt); }, "unscale_() was called after step()");
  expect_error([&] { scaler.step(opt); }, "step() has already been called on this SGD");
  scaler.update();
  opt.zero_grad();
  expect_error([&] { scaler.step(opt); }, "none of the SGD's parameters has a gradient");
  expect_error([&] { scaler.update(-1.0); }, "the new scale must be finite and > 0 in float32");
  expect_error([&] { scaler.update(1e39); },
               "[GradScaler] update(new_scale): the new scale must be finite and > 0 in float32, where the scale is "
               "kept; got 1e+39");
  expect_error([&] { scaler.update(1e-50); }, "the new scale must be finite and > 0 in float32, where the scale is "
                                              "kept; got 1e-50 (0 in float32)");
  expect_error([&] { scaler.scale(ones({2}, kInt64)); }, "scale() expects a floating tensor, got int64");
}

TEST(GradScaler, RefusesBadOptionsAndStateDicts) {
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().growth_factor(1.0)); }, "growth_factor must be");
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().backoff_factor(1.0)); }, "backoff_factor must be");
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().init_scale(0.0)); }, "init_scale must be finite");
  // S is float32: a finite double past float32's range would be inf there, one below its
  // smallest denormal 0; the factors multiply it there too.
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().init_scale(1e300)); },
               "[GradScaler] options: init_scale must be finite and > 0 in float32, where the scale is kept; got 1e+300");
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().init_scale(1e-50)); },
               "[GradScaler] options: init_scale must be finite and > 0 in float32, where the scale is kept; got 1e-50 "
               "(0 in float32)");
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().growth_factor(1.0 + 1e-9)); },
               "[GradScaler] options: growth_factor must be finite and > 1 in float32");
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().backoff_factor(1e-50)); },
               "[GradScaler] options: backoff_factor must be in (0, 1) in float32");
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().backoff_factor(1.0 - 1e-9)); },
               "[GradScaler] options: backoff_factor must be in (0, 1) in float32");
  expect_error([] { optim::GradScaler(optim::GradScalerOptions().growth_interval(0)); }, "growth_interval must be");
  optim::GradScaler scaler;
  expect_error([&] { scaler.load_state_dict({}); }, "the state dict is empty");
  optim::StateDict state = scaler.state_dict();
  state["extra"] = scalar_tensor(1.0);
  expect_error([&] { scaler.load_state_dict(state); }, "unexpected key 'extra'");
  state.erase("extra");
  state.erase("growth_factor");
  expect_error([&] { scaler.load_state_dict(state); }, "missing key 'growth_factor'");
  state = scaler.state_dict();
  state["_growth_tracker"] = scalar_tensor(5000.0, kInt64);
  expect_error([&] { scaler.load_state_dict(state); }, "_growth_tracker 5000 must be in [0, growth_interval 2000)");
  EXPECT_EQ(scaler.get_scale(), 65536.0);  // nothing changed
}

}  // namespace
