// The autograd engine: gradient flow and accumulation, retain_graph, autograd::grad, grad mode,
// saved-tensor hooks, the version-counter check, op state, and the errors of misuse.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "core/autograd/engine.h"
#include "core/autograd/function.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/autograd/saved_tensor.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::values;

TEST(Autograd, ChainRuleAndSummedPaths) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = sum(x * x + x);  // x used on three paths
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 5, 7}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(std::string(y.grad_fn()->name()), "sum");
}

TEST(Autograd, DiamondGraph) {
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor b = a * 2.0, c = a * 3.0;
  sum(b * c).backward();  // d/da 6a^2 = 12a
  EXPECT_EQ(values(a.grad()), (std::vector<double>{12, 24}));
}

TEST(Autograd, GradAccumulatesAcrossBackwardCalls) {
  Tensor w = tensor({1, 1}).requires_grad_();
  sum(w * 2.0).backward();
  sum(w * 3.0).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{5, 5}));
  w.grad().zero_();
  sum(w).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{1, 1}));
}

// Note [Taking over the incoming gradient]: .grad never aliases a tensor someone else can see,
// and a .grad the caller holds is not summed into in place.
TEST(Autograd, LeafGradientsNeverAliasWhatOthersHold) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor seed = tensor({4, 5, 6});
  (x * 1.0).backward(seed);  // the identity's backward passes the caller's seed straight on
  EXPECT_FALSE(x.grad().storage() == seed.storage());
  seed.fill_(0.0);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{4, 5, 6}));

  const Tensor held = x.grad();
  sum(x * 2.0).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{6, 7, 8}));
  EXPECT_EQ(values(held), (std::vector<double>{4, 5, 6}));  // held by the caller: a new sum
  const Storage* before = x.grad().storage().get();
  sum(x).backward();  // now only the leaf holds .grad: summed in place
  EXPECT_EQ(values(x.grad()), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(x.grad().storage().get(), before);
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = x * x;
  expect_error([&] { y.backward(); }, "[backward] grad can be implicitly created only for scalar outputs, got an output of shape [2]");
  expect_error([&] { y.backward(ones({3})); }, "[backward] gradient of shape [3] does not match output 0 of shape [2]");
  y.backward(tensor({1, 10}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 40}));
}

TEST(Autograd, BackwardTwiceNeedsRetainGraph) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(x.grad().at({0}), 2 * std::exp(1.0), 1e-5);
  expect_error([&] { y.backward(); }, "[exp] trying to backward through the graph a second time");
}

TEST(Autograd, BackwardOnATensorWithoutGraph) {
  expect_error([] { sum(ones({2})).backward(); }, "[backward] element 0 of tensors does not require grad and does not have a grad_fn");
}

TEST(Autograd, GradFunctionLeavesDotGradAlone) {
  Tensor x = tensor({1, 2}).requires_grad_(), w = tensor({3, 4}).requires_grad_();
  Tensor y = sum(x * w);
  std::vector<Tensor> g = autograd::grad({y}, {x, w});
  EXPECT_EQ(values(g[0]), (std::vector<double>{3, 4}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{1, 2}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  Tensor h = x * 2.0;  // a non-leaf input
  std::vector<Tensor> gh = autograd::grad({sum(h * h)}, {h});
  EXPECT_EQ(values(gh[0]), (std::vector<double>{4, 8}));
  Tensor unused = tensor({1}).requires_grad_();
  expect_error([&] { autograd::grad({sum(x * 2.0)}, {unused}); }, "[autograd::grad] input 0 (shape [1]) is not reachable from the outputs");
  expect_error([&] { autograd::grad({sum(x * 2.0)}, {ones({1})}); }, "[autograd::grad] input 0 does not require grad");
}

TEST(Autograd, DetachAndNoGrad) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.storage(), x.storage());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(is_grad_enabled());
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(y.grad_fn());
    {
      EnableGradGuard enable;
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
  }
  EXPECT_TRUE(is_grad_enabled());
  Tensor y = x * 2.0;
  expect_error([&] { y.requires_grad_(false); }, "[requires_grad_] can only change requires_grad of leaf tensors");
}

TEST(Autograd, GradModeIsThreadLocal) {
  NoGradGuard no_grad;
  bool other_thread_enabled = false;
  std::thread t([&] { other_thread_enabled = is_grad_enabled(); });
  t.join();
  EXPECT_TRUE(other_thread_enabled);
  EXPECT_FALSE(is_grad_enabled());
}

TEST(Autograd, ModifiedSavedTensorFailsAtBackward) {
  Tensor a = tensor({1, 2}).requires_grad_();
  Tensor b = tensor({3, 4});
  Tensor y = sum(a * b);  // mul saves b
  b.mul_(2.0);
  expect_error([&] { y.backward(); }, "[mul] a tensor saved for backward by mul was modified in place (version 1, expected 0)");
}

TEST(Autograd, InPlaceOnATrackedTensorIsRefused) {
  Tensor w = tensor({1, 2}).requires_grad_();
  expect_error([&] { w.add_(ones({2})); }, "[add_] in-place operation on a tensor of shape [2] that takes part in autograd");
  Tensor plain = zeros({2});
  expect_error([&] { plain.copy_(w); }, "[copy_] in-place operation");
  NoGradGuard no_grad;  // an optimizer step
  w.add_(ones({2}), -0.5);
  EXPECT_EQ(values(w), (std::vector<double>{0.5, 1.5}));
}

TEST(Autograd, SavedTensorHooksPackAndUnpack) {
  int packed = 0, unpacked = 0;
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y;
  {
    autograd::SavedTensorHooksGuard hooks({[&](const Tensor& t) -> std::any {
                                             ++packed;
                                             return t.clone();  // keep a private copy
                                           },
                                           [&](const std::any& p) {
                                             ++unpacked;
                                             return std::any_cast<Tensor>(p);
                                           }});
    y = sum(exp(x) * x);  // exp saves its output, mul saves both inputs
  }
  EXPECT_EQ(packed, 3);
  y.backward();
  EXPECT_EQ(unpacked, 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(x.grad().at({i}), std::exp(i + 1.0) * (i + 2.0), 1e-4);
}

TEST(Autograd, InnermostHooksApply) {
  int outer = 0, inner = 0;
  auto counting = [](int& n) {
    return autograd::SavedTensorHooks{[&n](const Tensor& t) -> std::any {
                                        ++n;
                                        return t;
                                      },
                                      [](const std::any& p) { return std::any_cast<Tensor>(p); }};
  };
  Tensor x = tensor({1.0}).requires_grad_();
  autograd::SavedTensorHooksGuard a(counting(outer));
  Tensor y = exp(x);
  {
    autograd::SavedTensorHooksGuard b(counting(inner));
    y = exp(y);
  }
  EXPECT_EQ(outer, 1);
  EXPECT_EQ(inner, 1);
}

TEST(Autograd, NodeSavingItsOutputIsFreedWithTheOutput) {
  std::weak_ptr<autograd::Node> node;
  Tensor x = tensor({1.0}).requires_grad_();
  {
    Tensor y = exp(x);  // Exp saves y: must not keep its own node alive
    node = y.grad_fn();
    EXPECT_FALSE(node.expired());
  }
  EXPECT_TRUE(node.expired());
}

TEST(Autograd, EngineChecksGradientShapes) {
  Tensor x = tensor({1, 2, 3}).requires_grad_();
  Tensor y = x.reshape({3, 1}).expand({3, 4});
  sum(y).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{4, 4, 4}));
}

TEST(Autograd, GradRunsOnlyWhatLeadsToTheInputs) {
  Tensor x = tensor({1, 2}).requires_grad_(), w = tensor({3, 4}).requires_grad_();
  int exp_unpacks = 0;
  Tensor h;
  {
    autograd::SavedTensorHooksGuard count({[](const Tensor& t) -> std::any { return t; },
                                           [&](const std::any& p) {
                                             ++exp_unpacks;
                                             return std::any_cast<Tensor>(p);
                                           }});
    h = exp(w);  // not on the path from the loss to x
  }
  Tensor y = sum(x * h);
  std::vector<Tensor> g = autograd::grad({y}, {x});
  EXPECT_EQ(values(g[0]), values(h));
  EXPECT_EQ(exp_unpacks, 0);  // exp's backward never ran
  EXPECT_FALSE(w.grad().defined());
}

namespace {

// y = factor * x, with the factor kept in the op's State (Note [Op state]).
struct ScaleBy : autograd::Function<ScaleBy> {
  static constexpr const char* name = "scale_by";
  struct State {
    double factor = 0;
  };
  static Tensor forward(autograd::Ctx&, State& s, const Tensor& x, double factor) {
    s.factor = factor;
    return x * factor;
  }
  static autograd::Grads backward(autograd::Ctx&, const State& s, const Tensor& g) { return {g * s.factor}; }
};

// y = x + x, with nothing to keep: the short signatures.
struct Twice : autograd::Function<Twice> {
  static constexpr const char* name = "twice";
  static Tensor forward(autograd::Ctx&, const Tensor& x) { return x + x; }
  static autograd::Grads backward(autograd::Ctx&, const Tensor& g) { return {g + g}; }
};

static_assert(autograd::HasState<ScaleBy>);
static_assert(!autograd::HasState<Twice>);

}  // namespace

TEST(Autograd, EachNodeHoldsTheStateItsForwardFilled) {
  Tensor x = tensor({1, 2}).requires_grad_();
  Tensor by_two = ScaleBy::apply(x, 2.0), by_three = ScaleBy::apply(x, 3.0);
  auto* node = dynamic_cast<autograd::FunctionNode<ScaleBy>*>(by_two.grad_fn().get());
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->state.factor, 2.0);
  sum(by_two + by_three + Twice::apply(x)).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{7, 7}));  // 2 + 3 + 2: one State per node
  {
    NoGradGuard no_grad;  // not recording: forward fills a State of its own
    EXPECT_EQ(values(ScaleBy::apply(x, 4.0)), (std::vector<double>{4, 8}));
  }
}

TEST(Autograd, ScalarsFollowPythonNumberRules) {
  Tensor i = arange(4, kInt64);
  EXPECT_EQ((i * 2.0).dtype(), kFloat32);  // a double is a Python float
  EXPECT_EQ((i * 0.5).dtype(), kFloat32);
  EXPECT_EQ(values(i * 0.5), (std::vector<double>{0, 0.5, 1, 1.5}));
  EXPECT_EQ(values(i / 2.0), (std::vector<double>{0, 0.5, 1, 1.5}));
  EXPECT_EQ(values(i + 0.5), (std::vector<double>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(values(i > 1.5), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(values(i == 1.0), (std::vector<double>{0, 1, 0, 0}));
}
