// Hostile and degenerate inputs to the newer surface, each of which once crashed, looped forever
// or gave silent garbage, now an ember::Error that names the op (or the right answer): undefined
// tensors, very long graphs, module cycles and shared modules, sizes near INT64_MAX, integer
// wrap-around, gradcheck's arguments, masked_fill's value, an optimizer's partial state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

#include "core/autograd/gradcheck.h"
#include "data/sampler.h"
#include "nn/linear.h"
#include "nn/module_list.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "test_helpers.h"

using namespace ember;
using testutil::error_of;
using testutil::expect_error;
using testutil::values;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

}  // namespace

// Note [Undefined tensors fail cleanly]
TEST(UndefinedTensors, AnOpGivenOneNamesItself) {
  const Tensor none, a = ones({2});
  expect_error([&] { where(none, a, a); }, "[where] an argument is an undefined tensor");
  expect_error([&] { add(a, none); }, "[add] an argument is an undefined tensor");
  expect_error([&] { matmul(none, a); }, "[matmul] input is an undefined tensor");
  expect_error([&] { (void)none.shape(); }, "[Tensor::shape] called on an undefined tensor");
  expect_error([&] { none.item(); }, "undefined tensor");
  EXPECT_FALSE(none.defined());  // asking is always fine
}

TEST(UndefinedTensors, LoadStateDictRefusesThemEvenWhenNotStrict) {
  nn::Linear layer(2, 3);
  nn::StateDict state = layer.state_dict();
  state["weight"] = Tensor();
  expect_error([&] { layer.load_state_dict(state, /*strict=*/false); }, "weight");
}

TEST(LoadStateDict, ANonStrictLoadReturnsTheKeysItSkipped) {
  nn::Linear layer(2, 3);
  nn::StateDict state = layer.state_dict();
  state.erase("bias");
  state["extra"] = ones({1});
  const nn::LoadResult result = layer.load_state_dict(state, /*strict=*/false);
  EXPECT_EQ(result.missing_keys, std::vector<std::string>{"bias"});
  EXPECT_EQ(result.unexpected_keys, std::vector<std::string>{"extra"});
  const nn::LoadResult clean = layer.load_state_dict(layer.state_dict());
  EXPECT_TRUE(clean.missing_keys.empty() && clean.unexpected_keys.empty());
}

// Note [Destroying long graphs]: a chain far deeper than the stack backs up and is destroyed
// without recursion.
TEST(LongGraphs, AMillionOpChainRunsBackwardAndIsDestroyed) {
  Tensor x = ones({1}).requires_grad_();
  {
    Tensor y = x;
    for (int i = 0; i < 1'000'000; ++i) y = y * 1.0;
    y.backward();
  }  // the chain dies here
  EXPECT_EQ(values(x.grad()), std::vector<double>{1.0});
  Tensor z = x;
  for (int i = 0; i < 1'000'000; ++i) z = z + 0.0;
  z = Tensor();  // dropped without a backward: the saved graph goes the same way
  SUCCEED();
}

// Note [Modules form a tree without cycles]
TEST(ModuleTree, ACycleIsRefusedWhereItWouldBeMade) {
  auto a = std::make_shared<nn::ModuleList>(), b = std::make_shared<nn::ModuleList>();
  a->append(b);
  expect_error([&] { b->append(a); }, "would make a cycle: it already contains this module");
  auto c = std::make_shared<nn::ModuleList>();
  b->append(c);
  expect_error([&] { c->append(a); }, "would make a cycle");  // two levels down
  EXPECT_EQ(a->named_modules().size(), 3u);                   // and the walks still end
}

// Note [Shared modules and parameters]
struct TiedTwice : nn::Module {
  nn::Linear shared{1, 1, /*bias=*/false};
  TiedTwice() {
    register_module("first", shared);
    register_module("second", shared);
  }
  Tensor forward(const Tensor& x) override { return shared(shared(x)); }
};

TEST(SharedModules, AreListedOnceButSavedUnderEveryName) {
  TiedTwice net;
  EXPECT_EQ(net.parameters().size(), 1u);
  EXPECT_EQ(net.named_parameters().front().first, "first.weight");
  EXPECT_EQ(net.named_modules().size(), 2u);
  EXPECT_EQ(net.state_dict().size(), 2u);  // first.weight and second.weight
  // Clipping counts the shared gradient once: a gradient of 3 has norm 3, not 3 * sqrt(2).
  {
    NoGradGuard no_grad;
    net.shared.weight.fill_(1.0);
  }
  net.shared.weight.set_grad(full({1, 1}, 3.0));
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm_(net.parameters(), 100.0).item(), 3.0);
  // An optimizer over them steps the weight once.
  optim::SGD sgd(net.parameters(), optim::SGDOptions(1.0));
  sgd.step();
  EXPECT_EQ(values(net.shared.weight), std::vector<double>{-2.0});
}

// Note [Checked size arithmetic]
TEST(Overflow, SizesNearInt64MaxAreRefusedNotWrapped) {
  const Tensor x = ones({4});
  expect_error([&] { split(x, Shape{kMax, kMax, 2}); }, "[split] sizes");
  expect_error([&] { pad(x, Shape{kMax, kMax}); }, "[pad]");
  expect_error([&] { pad(x, Shape{-5, 0}); }, "would leave a negative size");
  expect_error([&] { pad(x, Shape{std::numeric_limits<int64_t>::min(), 0}); }, "would leave a negative size");
  expect_error([&] { pad(ones({1 << 20, 4}), Shape{0, 0, kMax / 4, 0}); }, "does not fit in int64");

  const data::DistributedSampler sampler(3, 0, data::DistributedSamplerOptions{false});
  EXPECT_EQ(sampler.length(kMax), kMax / 3 + 1);  // rounds up without overflowing
  expect_error([&] { sampler.length(-1); }, "must not be negative");

  Tensor w = ones({1}).requires_grad_();
  optim::SGD sgd({w}, optim::SGDOptions(0.1));
  optim::StepLR schedule(sgd, 1, 0.5);
  schedule.load_state_dict({{"last_epoch", scalar_tensor(static_cast<double>(kMax), kInt64)},
                            {"base_lrs", tensor({0.1})}});
  expect_error([&] { schedule.step(); }, "cannot advance");
}

// Note [Integer cumsum wraps]
TEST(IntegerCumsum, WrapsAroundAsTwosComplement) {
  const Tensor x = from_vector(std::vector<int64_t>{kMax, 1, 1}, {3}, kInt64);
  const std::vector<int64_t> got = cumsum(x, 0).to_vector<int64_t>();
  EXPECT_EQ(got, (std::vector<int64_t>{kMax, std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::min() + 1}));
}

TEST(Gradcheck, RefusesBadStepsAndTolerances) {
  auto fn = [](const std::vector<Tensor>& v) { return v[0] * v[0]; };
  const Tensor x = testutil::leaf({3});
  for (double eps : {0.0, -1e-6, std::nan(""), std::numeric_limits<double>::infinity()})
    expect_error([&] { autograd::gradcheck(fn, {x}, eps); }, "eps");
  expect_error([&] { autograd::gradcheck(fn, {x}, std::nullopt, std::nan("")); }, "atol");
  expect_error([&] { autograd::gradcheck(fn, {x}, std::nullopt, std::nullopt, -1.0); }, "rtol");
  expect_error([&] { autograd::gradcheck([](const std::vector<Tensor>&) { return Tensor(); }, {x}); },
               "undefined");
}

TEST(Gradcheck, PutsThePerturbedElementBackWhenTheFunctionThrows) {
  const Tensor x = testutil::leaf({3});
  const std::vector<double> before = values(x);
  int calls = 0;
  auto throws_when_perturbed = [&](const std::vector<Tensor>& v) {
    if (++calls > 1) EMBER_FAIL("[test] refusing the perturbed input");
    return v[0] * 2.0;
  };
  expect_error([&] { autograd::gradcheck(throws_when_perturbed, {x}); }, "refusing the perturbed input");
  EXPECT_EQ(values(x), before);
}

TEST(Gradcheck, ANaNGradientFails) {
  auto nan_grad = [](const std::vector<Tensor>& v) { return sqrt(v[0]); };  // d/dx sqrt at 0 is inf
  const Tensor x = zeros({2}, kFloat64).requires_grad_();
  EXPECT_FALSE(autograd::gradcheck(nan_grad, {x}).ok);
}

TEST(MaskedFill, AnIntegerTensorRefusesAValueItCannotHold) {
  const Tensor x = from_vector(std::vector<int64_t>{1, 2}, {2}, kInt64), mask = tensor({1.0, 0.0}).to(kUInt8);
  expect_error([&] { masked_fill(x, mask, std::nan("")); }, "[masked_fill] value nan cannot be converted to int64");
  expect_error([&] { masked_fill(x, mask, 1e300); }, "without overflow");
  expect_error([&] { masked_fill(x.to(kUInt8), mask, 256); }, "cannot be converted to uint8");
  expect_error([&] { masked_fill(x.to(kUInt8), mask, -1); }, "cannot be converted to uint8");
  EXPECT_EQ(masked_fill(x.to(kUInt8), mask, 255).to_vector<int64_t>(), (std::vector<int64_t>{255, 2}));
  EXPECT_EQ(masked_fill(x, mask, -9007199254740992.0).to_vector<int64_t>(),
            (std::vector<int64_t>{-9007199254740992, 2}));
}

// PyTorch's checked conversion of a written value, for every dtype and every op that writes one:
// a floating dtype takes NaN and the infinities but no finite number past its largest (full and
// fill_ of a 16-bit float convert through float32, as PyTorch's fill), and a number in an
// expression is not checked (1e300 in a float16 sum is inf, as in PyTorch).
TEST(FillValues, EveryDtypeRefusesAValueItCannotHold) {
  const Tensor mask = tensor({1.0, 0.0}).to(kUInt8);
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {kFloat16, kBFloat16, kFloat32}) {
    const Tensor x = zeros({2}, dtype);
    expect_error([&] { full({2}, 1e300, dtype); },
                 detail::concat("[full] value 1e+300 cannot be converted to ", dtype, " without overflow (", dtype,
                                " tensor of shape [2])"));
    expect_error([&] { x.fill_(-1e300); }, detail::concat("[fill_] value -1e+300 cannot be converted to ", dtype));
    expect_error([&] { masked_fill(x, mask, 1e300); }, "[masked_fill] value 1e+300 cannot be converted");
    expect_error([&] { pad(x, {1, 1}, PadMode::Constant, 1e300); }, "[pad] value 1e+300 cannot be converted");
    for (double fine : {inf, -inf, finfo(dtype).max, -finfo(dtype).max}) {
      EXPECT_EQ(full({1}, fine, dtype).item(), fine);
      EXPECT_EQ(masked_fill(x, mask, fine).to(kFloat64).to_vector<double>()[0], fine);
    }
    EXPECT_TRUE(std::isnan(full({1}, std::nan(""), dtype).item()));
    EXPECT_EQ((x + 1e300).to(kFloat64).to_vector<double>()[0], inf);
    EXPECT_EQ(scalar_tensor(1e300, dtype).item(), inf);
  }
  // float16 past its range: full rounds through float32 to inf, as PyTorch 2.15's full does;
  // fill_, a mask and a pad refuse it, as PyTorch's do.
  EXPECT_EQ(full({1}, 70000.0, kFloat16).item(), inf);
  expect_error([&] { zeros({2}, kFloat16).fill_(-70000.0); }, "[fill_] value -70000 cannot be converted to float16");
  expect_error([&] { zeros({2}, kBFloat16).fill_(1e39); }, "[fill_] value 1e+39 cannot be converted to bfloat16");
  EXPECT_EQ(full({1}, 65504.0, kFloat16).item(), 65504.0);
  expect_error([&] { masked_fill(zeros({2}, kFloat16), mask, -1e9); },
               "[masked_fill] value -1e+09 cannot be converted to float16 without overflow");
  expect_error([&] { pad(zeros({2}, kFloat16), {1, 1}, PadMode::Constant, 70000.0); }, "[pad] value 70000");
  expect_error([&] { full({2}, std::nan(""), kInt64); }, "[full] value nan cannot be converted to int64");
  expect_error([&] { full({2}, 0x1p63, kInt64); }, "[full] value 9.22337e+18 cannot be converted to int64");
  expect_error([&] { zeros({2}, kUInt8).fill_(-inf); }, "[fill_] value -inf cannot be converted to uint8");
  EXPECT_EQ(full({1}, 255.5, kUInt8).item(), 255);  // truncated into range, as PyTorch
  EXPECT_EQ(full({1}, 1e300, kFloat64).item(), 1e300);
  // A comparison with a number past an integer tensor's range is made in float64, as PyTorch's with
  // a Python float (with a Python int PyTorch wraps it: uint8 > -1 is false there).
  const Tensor ints = from_vector(std::vector<int64_t>{1, INT64_MAX}, {2}, kInt64);
  EXPECT_EQ((ints < 1e30).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ((ints == inf).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  const Tensor bytes = from_vector(std::vector<int64_t>{0, 44}, {2}, kInt64).to(kUInt8);
  EXPECT_EQ((bytes > -1.0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));  // not against a wrapped 255
  EXPECT_EQ((bytes == 300.0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));  // not against a wrapped 44
}

TEST(OptimizerState, APartialParameterStateIsRefusedAndALostOneIsReported) {
  Tensor w = ones({2}).requires_grad_();
  optim::Adam adam({w}, optim::AdamOptions(0.1));
  EXPECT_EQ(adam.missing_state_keys(), (std::vector<std::string>{"state.0.step", "state.0.exp_avg",
                                                                 "state.0.exp_avg_sq"}));  // not stepped yet
  w.set_grad(ones({2}));
  adam.step();
  EXPECT_TRUE(adam.missing_state_keys().empty());  // max_exp_avg_sq is made only with amsgrad
  nn::StateDict state = adam.state_dict();
  ASSERT_EQ(state.erase("state.0.exp_avg_sq"), 1u);
  expect_error([&] { adam.load_state_dict(state); },
               "[Adam] load_state_dict: missing key 'state.0.exp_avg_sq': parameter 0 has state");

  // SGD keeps one entry, so a lost buffer leaves no state at all: a fresh parameter's, which
  // loads, and which missing_state_keys() reports (a resume after steps refuses it).
  optim::SGD sgd({w}, optim::SGDOptions(0.1).momentum(0.9));
  sgd.step();
  nn::StateDict sgd_state = sgd.state_dict();
  ASSERT_EQ(sgd_state.erase("state.0.momentum_buffer"), 1u);
  sgd.load_state_dict(sgd_state);
  EXPECT_EQ(sgd.missing_state_keys(), std::vector<std::string>{"state.0.momentum_buffer"});
  optim::SGD plain({w}, optim::SGDOptions(0.1));  // without momentum there is no buffer to miss
  EXPECT_TRUE(plain.missing_state_keys().empty());
}
