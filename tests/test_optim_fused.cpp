// The fused optimizer step (Note [Multi-tensor optimizer updates] in core/optimizer_step.h)
// against the composed update it replaces: for every combination of the options that change the
// formula, float32 and float64, over several steps, the parameters and the whole state must be
// bitwise the same (Note [Replaying the composed update's rounding]); so must parameter groups
// with different options, mixed dtypes, parameters the kernel does not take, resumed runs and
// hyper-parameters changed between steps. tests/test_optim.cpp compares both with PyTorch.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/optimizer_step.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adamw.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;

namespace {

constexpr int kSteps = 4;

// Sizes around the CPU kernel's chunk of 16384 elements, so that chunks span parameters, and
// above the parallel threshold, so that several threads take chunks; a parameter of one element
// and an empty one.
const std::vector<Shape> kShapes = {{3, 5000}, {17}, {20000}, {1}, {0}, {129, 7}};
constexpr size_t kSometimesWithoutGrad = 3;  // the {1} parameter: no grad on odd steps

// Same dtype, shape and bytes: -0 differs from +0 here, and a NaN must be the same NaN.
void expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const Tensor ca = a.to(kCPU).contiguous(), cb = b.to(kCPU).contiguous();
  if (ca.nbytes() == 0) return;  // empty: no data pointer to compare
  EXPECT_EQ(std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()), 0) << what << " differs";
}

void expect_same_state(const optim::Optimizer& a, const optim::Optimizer& b, const std::string& what) {
  const optim::StateDict sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size()) << what;
  for (const auto& [key, value] : sa) {
    ASSERT_TRUE(sb.count(key)) << what << ": " << key << " only on one side";
    expect_bitwise(value, sb.at(key), what + ", " + key);
  }
}

// Random values with exact zeros of both signs in the first elements: the rules' treatment of
// -0 (Note [Replaying the composed update's rounding]) shows in the bits.
Tensor values_with_zeros(const Shape& shape, DType dtype) {
  Tensor t = randn(shape, dtype);
  std::vector<double> v = t.to_vector<double>();
  if (v.size() > 2) v[0] = -0.0, v[1] = 0.0;
  return from_vector(v, shape, dtype);
}

std::vector<Tensor> make_params(DType dtype) {
  std::vector<Tensor> out;
  for (const Shape& s : kShapes) out.push_back(values_with_zeros(s, dtype).requires_grad_());
  return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// The gradients of step k, one per parameter (undefined: no grad at that step).
using Grads = std::function<std::vector<Tensor>(int k)>;

// Fresh random gradients like the parameters, zeros of both signs included, and none for one
// parameter on odd steps.
Grads random_grads(const std::vector<Tensor>& params) {
  return [params](int k) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < params.size(); ++i)
      out.push_back(i == kSometimesWithoutGrad && k % 2 == 1 ? Tensor()
                                                             : values_with_zeros(params[i].shape(), params[i].dtype()));
    return out;
  };
}

// Gives both sets of parameters copies of step k's gradients and steps both optimizers.
void step_both(optim::Optimizer& fused, const std::vector<Tensor>& fused_params, optim::Optimizer& reference,
               const std::vector<Tensor>& reference_params, const Grads& grads, int k) {
  const std::vector<Tensor> g = grads(k);
  for (size_t i = 0; i < g.size(); ++i) {
    fused_params[i].set_grad(g[i].defined() ? g[i].clone() : Tensor());
    reference_params[i].set_grad(g[i].defined() ? g[i].clone() : Tensor());
  }
  fused.step();
  reference.step();
}

// Both sets of parameters and both state dicts are the same bits.
void expect_same(const optim::Optimizer& fused, const std::vector<Tensor>& fused_params,
                 const optim::Optimizer& reference, const std::vector<Tensor>& reference_params,
                 const std::string& what) {
  for (size_t i = 0; i < fused_params.size(); ++i)
    expect_bitwise(fused_params[i], reference_params[i], what + ", parameter " + std::to_string(i));
  expect_same_state(fused, reference, what);
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> params, bool fused)>;

// Steps a fused and a composed optimizer over the same gradients; after every step the
// parameters and the state dicts must match bit for bit.
void expect_fused_is_reference(const MakeOptimizer& make, const std::string& what) {
  for (DType dtype : {kFloat32, kFloat64}) {
    manual_seed(7);
    const std::vector<Tensor> a = make_params(dtype), b = clones(a);
    auto fused = make(a, true), reference = make(b, false);
    for (int k = 0; k < kSteps; ++k) {
      step_both(*fused, a, *reference, b, random_grads(a), k);
      expect_same(*fused, a, *reference, b, what + ", " + dtype_name(dtype) + ", step " + std::to_string(k + 1));
    }
  }
}

}  // namespace

// An optimizer of type Opt with these options, fused or composed.
template <class Opt, class Options>
MakeOptimizer with_options(const Options& options) {
  return [options](std::vector<Tensor> params, bool fused) {
    return std::make_unique<Opt>(std::move(params), Options(options).fused(fused));
  };
}

TEST(OptimFused, SgdEveryOptionCombination) {
  for (double momentum : {0.0, 0.9})
    for (double dampening : {0.0, 0.3})
      for (bool nesterov : {false, true})
        for (double weight_decay : {0.0, 0.01})
          for (bool maximize : {false, true}) {
            if ((momentum == 0.0 && (dampening != 0.0 || nesterov)) || (nesterov && dampening != 0.0)) continue;
            expect_fused_is_reference(with_options<optim::SGD>(optim::SGDOptions(0.1)
                                                                   .momentum(momentum)
                                                                   .dampening(dampening)
                                                                   .nesterov(nesterov)
                                                                   .weight_decay(weight_decay)
                                                                   .maximize(maximize)),
                                      "SGD momentum " + std::to_string(momentum) + " dampening " +
                                          std::to_string(dampening) + " nesterov " + std::to_string(nesterov) +
                                          " weight_decay " + std::to_string(weight_decay) + " maximize " +
                                          std::to_string(maximize));
          }
}

// beta1 = 0 makes add_'s alpha 1 - beta1 exactly 1, which adds the gradient without a product.
TEST(OptimFused, AdamAndAdamWEveryOptionCombination) {
  for (double beta1 : {0.9, 0.0})
    for (double weight_decay : {0.0, 0.05})
      for (bool amsgrad : {false, true}) {
        const std::string what = " beta1 " + std::to_string(beta1) + " weight_decay " + std::to_string(weight_decay) +
                                 " amsgrad " + std::to_string(amsgrad);
        const auto options = [&]<class Options>(Options o) {
          return o.betas({beta1, 0.99}).weight_decay(weight_decay).amsgrad(amsgrad);
        };
        expect_fused_is_reference(with_options<optim::Adam>(options(optim::AdamOptions(0.01))), "Adam" + what);
        expect_fused_is_reference(with_options<optim::AdamW>(options(optim::AdamWOptions(0.01))), "AdamW" + what);
      }
}

// alpha = 0 makes add_'s alpha 1 - alpha exactly 1, as beta1 = 0 does for Adam.
TEST(OptimFused, RMSpropEveryOptionCombination) {
  for (double alpha : {0.99, 0.0})
    for (double weight_decay : {0.0, 0.01})
      for (bool centered : {false, true})
        for (double momentum : {0.0, 0.5})
          expect_fused_is_reference(with_options<optim::RMSprop>(optim::RMSpropOptions(0.01)
                                                                     .alpha(alpha)
                                                                     .weight_decay(weight_decay)
                                                                     .centered(centered)
                                                                     .momentum(momentum)),
                                    "RMSprop alpha " + std::to_string(alpha) + " weight_decay " +
                                        std::to_string(weight_decay) + " centered " + std::to_string(centered) +
                                        " momentum " + std::to_string(momentum));
}

TEST(OptimFused, AdagradEveryOptionCombination) {
  for (double lr_decay : {0.0, 0.1})
    for (double weight_decay : {0.0, 0.01})
      for (double initial : {0.0, 0.1})
        expect_fused_is_reference(with_options<optim::Adagrad>(optim::AdagradOptions(0.1)
                                                                   .lr_decay(lr_decay)
                                                                   .weight_decay(weight_decay)
                                                                   .initial_accumulator_value(initial)),
                                  "Adagrad lr_decay " + std::to_string(lr_decay) + " weight_decay " +
                                      std::to_string(weight_decay) + " initial_accumulator_value " +
                                      std::to_string(initial));
}

// Groups with their own options, one of them composed, and one mixing float32 and float64
// (a fused call per dtype).
TEST(OptimFused, ParamGroupsWithDifferentOptionsAndDtypes) {
  expect_fused_is_reference(
      [](std::vector<Tensor> p, bool fused) {
        return std::make_unique<optim::SGD>(std::vector<optim::SGDParamGroup>{
            {{p[0], p[1]}, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).fused(fused)},
            {{p[2], p[3]}, optim::SGDOptions(0.05).weight_decay(0.1).fused(fused)},
            {{p[4], p[5]}, optim::SGDOptions(0.2).momentum(0.5).dampening(0.5).fused(false)}});
      },
      "SGD groups");

  manual_seed(3);
  const std::vector<Tensor> a = {values_with_zeros({40}, kFloat32).requires_grad_(),
                                 values_with_zeros({30}, kFloat64).requires_grad_(),
                                 values_with_zeros({20}, kFloat32).requires_grad_()};
  const std::vector<Tensor> b = clones(a);
  optim::AdamW fused(a, optim::AdamWOptions(0.01).amsgrad(true));
  optim::AdamW reference(b, optim::AdamWOptions(0.01).amsgrad(true).fused(false));
  for (int k = 0; k < kSteps; ++k) step_both(fused, a, reference, b, random_grads(a), k);
  expect_same(fused, a, reference, b, "mixed dtypes");
}

// A non-contiguous parameter takes the composed update; the others of the group still take the
// kernel. (A gradient of another dtype, which the kernel refuses too, cannot be set: set_grad
// takes only the parameter's dtype, as PyTorch.)
TEST(OptimFused, ParametersTheKernelDoesNotTakeFallBack) {
  manual_seed(5);
  const Tensor base = randn({6, 4});
  const std::vector<Tensor> a = {base.t().requires_grad_(), randn({8}).requires_grad_(), randn({5}).requires_grad_()};
  const std::vector<Tensor> b = {base.clone().t().requires_grad_(), a[1].detach().clone().requires_grad_(),
                                 a[2].detach().clone().requires_grad_()};
  ASSERT_FALSE(a[0].is_contiguous());
  EXPECT_FALSE(fused_step_accepts(a[0], randn({4, 6})));
  EXPECT_FALSE(fused_step_accepts(a[1], randn({8}, kFloat64)));
  EXPECT_TRUE(fused_step_accepts(a[2], randn({5})));
  optim::SGD fused(a, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  optim::SGD reference(b, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01).fused(false));
  const Grads grads = [](int) { return std::vector<Tensor>{randn({4, 6}), randn({8}), randn({5})}; };
  for (int k = 0; k < kSteps; ++k) step_both(fused, a, reference, b, grads, k);
  expect_same(fused, a, reference, b, "fallback");
}

// After its first step the fused SGD allocates nothing: no temporaries, where the composed
// update makes several per parameter. So the kernel really ran.
TEST(OptimFused, FusedStepAllocatesNothing) {
  manual_seed(1);
  const std::vector<Tensor> a = make_params(kFloat32), b = clones(a);
  optim::SGD fused(a, optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
  optim::SGD reference(b, optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4).fused(false));
  step_both(fused, a, reference, b, random_grads(a), 0);
  const int64_t live = memory::stats().live_bytes;
  memory::reset_peak();
  fused.step();
  EXPECT_EQ(memory::stats().peak_bytes, live);
  reference.step();
  EXPECT_GT(memory::stats().peak_bytes, live);
}

// A resumed run is the same whichever path saved the state and whichever loads it, and the
// rules read the hyper-parameters of each step (a scheduler's lr, OneCycleLR's momentum).
TEST(OptimFused, ResumeAcrossPathsAndChangedHyperParameters) {
  manual_seed(11);
  const std::vector<Tensor> a = make_params(kFloat32), b = clones(a);
  optim::Adam fused(a, optim::AdamOptions(0.01).amsgrad(true));
  optim::Adam reference(b, optim::AdamOptions(0.01).amsgrad(true).fused(false));
  for (int k = 0; k < 2; ++k) step_both(fused, a, reference, b, random_grads(a), k);
  // Each continues from the other's state.
  const optim::StateDict from_fused = fused.state_dict(), from_reference = reference.state_dict();
  fused.load_state_dict(from_reference);
  reference.load_state_dict(from_fused);
  for (int k = 2; k < 5; ++k) {
    for (optim::Optimizer* opt : {static_cast<optim::Optimizer*>(&fused), static_cast<optim::Optimizer*>(&reference)}) {
      opt->set_lr(0.01 / k);
      opt->set_group_hyper_param(0, "beta1", 0.8);
    }
    step_both(fused, a, reference, b, random_grads(a), k);
  }
  expect_same(fused, a, reference, b, "resumed");
  EXPECT_EQ(fused.state_dict().at("state.0.step").item(), 5.0);
  EXPECT_EQ(fused.state_dict().at("state.3.step").item(), 3.0);  // no grad on steps 2 and 4
}

TEST(OptimFused, OpChecksItsArguments) {
  NoGradGuard no_grad;
  const Tensor p = zeros({3}), g = ones({3});
  const SgdRule sgd{0.1, 0.9, 0.0, 0.0, false, false};
  expect_error([&] { fused_optimizer_step(sgd, {{p, g, {}}}); },
               "[fused_optimizer_step] parameter 0 (float32 [3] on cpu): state 0 is undefined; expected contiguous "
               "float32 or float64 parameters, with grads and state of their dtype, shape and device");
  expect_error([&] { fused_optimizer_step(sgd, {{p, ones({4}), {zeros({3})}}}); }, "the grad is float32 [4] on cpu;");
  expect_error([&] { fused_optimizer_step(sgd, {{p, g, {zeros({3}, kFloat64)}}}); }, "state 0 is float64 [3] on cpu;");
  expect_error(
      [&] {
        const Tensor p64 = zeros({2}, kFloat64);
        fused_optimizer_step(sgd, {{p, g, {zeros({3})}}, {p64, ones({2}, kFloat64), {zeros({2}, kFloat64)}}});
      },
      "expects parameters of one dtype and device: parameter 0 is float32 on cpu, parameter 1 is float64 on cpu");
  const Tensor wide = zeros({3, 2});
  expect_error(
      [&] { fused_optimizer_step(AdagradRule{0.1, 0.0, 0.0, 1e-10}, {{wide.t(), ones({2, 3}), {zeros({2, 3})}}}); },
      "parameter 0 (float32 [2, 3] on cpu, not contiguous): the grad is float32 [2, 3] on cpu;");
  expect_error([&] { fused_optimizer_step(sgd, {{zeros({2}, kInt64), zeros({2}, kInt64), {zeros({2}, kInt64)}}}); },
               "parameter 0 (int64 [2] on cpu): the grad is int64 [2] on cpu;");
}

TEST(OptimFused, OpRefusesTrackedParametersWithGradModeOn) {
  const Tensor p = zeros({3}).requires_grad_();
  expect_error([&] { fused_optimizer_step(SgdRule{0.1, 0.0, 0.0, 0.0, false, false}, {{p, ones({3}), {}}}); },
               "in place, which takes part in autograd; run it under NoGradGuard");
  NoGradGuard no_grad;
  fused_optimizer_step(SgdRule{0.1, 0.0, 0.0, 0.0, false, false}, {{p, ones({3}), {}}});
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{-0.1f, -0.1f, -0.1f}));
}
