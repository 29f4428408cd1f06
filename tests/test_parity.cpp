// PyTorch parity: composite expressions computed with ember and compared, forward and backward,
// with golden values written by tests/fixtures/make_fixtures.py (torch; see that script for the
// exact expressions). The inputs come from the same files, so both sides see the same numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/autograd/engine.h"
#include "core/ops.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"

using namespace ember;
using ember::testutil::Fixture;
using namespace ember::testutil;

namespace {



#define EXPECT_MATCHES(f, name, got) EXPECT_TRUE(all_close(name, got, (f).get(name), testutil::tol_of(got)))

Tensor leaf(const Fixture& f, const std::string& name) { return f.get(name).requires_grad_(); }

}  // namespace

TEST(Parity, FixtureReaderReportsMissingNamesAndFiles) {
  Fixture f = Fixture::load("parity_mse.txt");
  EXPECT_TRUE(f.has("input"));
  try {
    f.get("no_such_tensor");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_tensor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Fixture::load("parity_no_such_case.txt"), std::runtime_error);
}

// cross_entropy(relu(x @ W1 + b1) @ W2 + b2, target), mean; gradients of the loss.
TEST(Parity, Mlp) {
  Fixture f = Fixture::load("parity_mlp.txt");
  Tensor x = leaf(f, "x"), W1 = leaf(f, "W1"), b1 = leaf(f, "b1"), W2 = leaf(f, "W2"), b2 = leaf(f, "b2");
  Tensor target = f.get("target");
  Tensor out = cross_entropy(matmul(relu(matmul(x, W1) + b1), W2) + b2, target);
  out.backward();
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_W1", W1.grad());
  EXPECT_MATCHES(f, "grad_b1", b1.grad());
  EXPECT_MATCHES(f, "grad_W2", W2.grad());
  EXPECT_MATCHES(f, "grad_b2", b2.grad());
}

// (log_softmax(x, 1) * sigmoid(y) + tanh(x)).mean(0); gradients of (out * w).sum().
void check_softmax_mix(const std::string& file) {
  Fixture f = Fixture::load(file);
  Tensor x = leaf(f, "x"), y = leaf(f, "y"), w = f.get("w");
  Tensor out = mean(log_softmax(x, 1) * sigmoid(y) + tanh(x), {0});
  sum(out * w).backward();
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_y", y.grad());
}
TEST(Parity, SoftmaxMix) { check_softmax_mix("parity_softmax_mix.txt"); }
TEST(Parity, SoftmaxMixFloat64) { check_softmax_mix("parity_softmax_mix_f64.txt"); }

// ((a[3,1,4] * b[5,1] - c[4]) / (1 + exp(a))).sum((0, 2)); gradients of (out * w).sum().
TEST(Parity, Broadcast) {
  Fixture f = Fixture::load("parity_broadcast.txt");
  Tensor a = leaf(f, "a"), b = leaf(f, "b"), c = leaf(f, "c"), w = f.get("w");
  Tensor out = sum((a * b - c) / (1.0 + exp(a)), {0, 2});
  sum(out * w).backward();
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_a", a.grad());
  EXPECT_MATCHES(f, "grad_b", b.grad());
  EXPECT_MATCHES(f, "grad_c", c.grad());
}

// gelu(x) ** 2 + sqrt(abs(x) + 1) + clamp(x, -0.5, 0.5); gradients of (out * w).sum().
void check_gelu_pow(const std::string& file) {
  Fixture f = Fixture::load(file);
  Tensor x = leaf(f, "x"), w = f.get("w");
  Tensor out = pow(gelu(x), 2.0) + sqrt(abs(x) + 1.0) + clamp(x, -0.5, 0.5);
  sum(out * w).backward();
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_x", x.grad());
}
TEST(Parity, GeluPow) { check_gelu_pow("parity_gelu_pow.txt"); }
TEST(Parity, GeluPowFloat64) { check_gelu_pow("parity_gelu_pow_f64.txt"); }

// m = matmul(a[2,3,4,5], b[3,5,6]).max(-1); g = gather(m, 2, gather_index);
// s = index_select(m, 1, select_index) (a repeated index); gradients of the weighted sum of all three.
TEST(Parity, MatmulBatched) {
  Fixture f = Fixture::load("parity_matmul_batched.txt");
  Tensor a = leaf(f, "a"), b = leaf(f, "b");
  Tensor m = max(matmul(a, b), {-1});
  Tensor g = gather(m, 2, f.get("gather_index"));
  Tensor s = index_select(m, 1, f.get("select_index"));
  Tensor loss = sum(m * f.get("w_max")) + sum(g * f.get("w_gather")) + sum(s * f.get("w_select"));
  loss.backward();
  EXPECT_MATCHES(f, "out_max", m);
  EXPECT_MATCHES(f, "out_gather", g);
  EXPECT_MATCHES(f, "out_select", s);
  EXPECT_MATCHES(f, "grad_a", a.grad());
  EXPECT_MATCHES(f, "grad_b", b.grad());
}

// softmax(stack([cat([a[2,3], b[4,3]], 0), c[6,3]], 1), -1); gradients of (out * w).sum().
TEST(Parity, CatStack) {
  Fixture f = Fixture::load("parity_cat_stack.txt");
  Tensor a = leaf(f, "a"), b = leaf(f, "b"), c = leaf(f, "c"), w = f.get("w");
  Tensor out = softmax(stack({cat({a, b}, 0), c}, 1), -1);
  sum(out * w).backward();
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_a", a.grad());
  EXPECT_MATCHES(f, "grad_b", b.grad());
  EXPECT_MATCHES(f, "grad_c", c.grad());
}

// cross_entropy with label_smoothing = 0.1 and one target equal to ignore_index; mean and sum.
TEST(Parity, CrossEntropyOptions) {
  Fixture f = Fixture::load("parity_cross_entropy_options.txt");
  Tensor target = f.get("target");
  const int64_t ignore_index = f.get("ignore_index").item<int64_t>();
  for (auto [reduction, tag] : {std::pair{Reduction::Mean, "mean"}, std::pair{Reduction::Sum, "sum"}}) {
    SCOPED_TRACE(tag);
    Tensor logits = leaf(f, "logits");
    Tensor out = cross_entropy(logits, target, reduction, ignore_index, 0.1);
    std::vector<Tensor> grads = autograd::grad({out}, {logits});
    ASSERT_EQ(grads.size(), 1u);
    EXPECT_MATCHES(f, std::string("out_") + tag, out);
    EXPECT_MATCHES(f, std::string("grad_") + tag + "_logits", grads[0]);
  }
}

// cross_entropy's forms beyond [N, C] with indices (Note [Cross-entropy beyond the fused
// kernel]): each case's loss and the gradient of (out * (1..n)).sum() against PyTorch's.
TEST(Parity, CrossEntropyForms) {
  Fixture f = Fixture::load("parity_cross_entropy_forms.txt");
  const Tensor target3 = f.get("target3"), target2 = f.get("target2"), weight = f.get("weight"),
               probs2 = f.get("probs2"), target1 = f.get("target1").reshape({});
  using Loss = std::function<Tensor(const Tensor&)>;
  const std::vector<std::tuple<std::string, std::string, Loss>> cases = {
      {"kdim_mean", "logits3", [&](const Tensor& x) { return cross_entropy(x, target3, Reduction::Mean, -1, 0.1); }},
      {"kdim_none", "logits3", [&](const Tensor& x) { return cross_entropy(x, target3, Reduction::None, -1); }},
      {"weighted_mean", "logits2",
       [&](const Tensor& x) { return cross_entropy(x, target2, Reduction::Mean, -1, 0.2, weight); }},
      {"weighted_sum", "logits2",
       [&](const Tensor& x) { return cross_entropy(x, target2, Reduction::Sum, -1, 0.2, weight); }},
      {"weighted_none", "logits2",
       [&](const Tensor& x) { return cross_entropy(x, target2, Reduction::None, -1, 0.2, weight); }},
      {"weighted_kdim_mean", "logits3",
       [&](const Tensor& x) { return cross_entropy(x, target3, Reduction::Mean, -1, 0.0, weight); }},
      {"probs_mean", "logits2",
       [&](const Tensor& x) { return cross_entropy(x, probs2, Reduction::Mean, -100, 0.1, weight); }},
      {"probs_none", "logits2", [&](const Tensor& x) { return cross_entropy(x, probs2, Reduction::None); }},
      {"one_sample", "logits1", [&](const Tensor& x) { return cross_entropy(x, target1, Reduction::None); }},
      {"one_sample_probs", "logits1",
       [&](const Tensor& x) { return cross_entropy(x, probs2.select(0, 0), Reduction::Mean, -100, 0.3); }},
  };
  for (const auto& [name, input, loss] : cases) {
    SCOPED_TRACE(name);
    const Tensor x = leaf(f, input);
    const Tensor out = loss(x);
    EXPECT_MATCHES(f, "out_" + name, out);
    const Tensor w = arange(1, static_cast<double>(out.numel()) + 1, 1, kFloat32).reshape(out.shape());
    sum(out * w).backward();
    EXPECT_MATCHES(f, "grad_" + name, x.grad());
  }
  // What the forms refuse, by name.
  const Tensor logits2 = f.get("logits2");
  expect_error([&] { cross_entropy(logits2, probs2.to(kFloat64)); },
               "[cross_entropy] class probabilities as target must have the logits' shape and dtype, [6, 4] float32; "
               "got [6, 4] float64");
  expect_error([&] { cross_entropy(logits2, target2, Reduction::Mean, -1, 0.0, ones({3})); },
               "[cross_entropy] weight of shape [3] must hold one weight per class, [4] for logits of shape [6, 4]");
  expect_error([&] { cross_entropy(f.get("logits3"), target2); },
               "[cross_entropy] target of shape [6] does not match logits of shape [3, 4, 5] (expected [3, 5])");
  expect_error([&] { cross_entropy(logits2, target2.to(kUInt8)); },
               "[cross_entropy] expects int64 class indices or floating class probabilities as target, got uint8");
  expect_error([&] { cross_entropy(zeros({}), target1); }, "[cross_entropy] expects logits of shape [C], [N, C]");
}

// mse_loss(input, target), mean and sum, gradients w.r.t. both.
TEST(Parity, Mse) {
  Fixture f = Fixture::load("parity_mse.txt");
  for (auto [reduction, tag] : {std::pair{Reduction::Mean, "mean"}, std::pair{Reduction::Sum, "sum"}}) {
    SCOPED_TRACE(tag);
    Tensor input = leaf(f, "input"), target = leaf(f, "target");
    Tensor out = mse_loss(input, target, reduction);
    std::vector<Tensor> grads = autograd::grad({out}, {input, target});
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_MATCHES(f, std::string("out_") + tag, out);
    EXPECT_MATCHES(f, std::string("grad_") + tag + "_input", grads[0]);
    EXPECT_MATCHES(f, std::string("grad_") + tag + "_target", grads[1]);
  }
}

// relu, maximum and minimum with NaNs and signed zeros: NaN propagates, and both operands of a
// NaN comparison receive the gradient. The tolerance comparison counts -0.0 equal to 0.0, so
// relu's sign of zero is asserted bit by bit.
TEST(Parity, NanExtremes) {
  Fixture f = Fixture::load("parity_nan_extremes.txt");
  Tensor x = leaf(f, "x"), y = leaf(f, "y");
  Tensor out_relu = relu(x), out_max = maximum(x, y), out_min = minimum(x, y);
  (sum(out_relu * f.get("w_relu")) + sum(out_max * f.get("w_max")) + sum(out_min * f.get("w_min"))).backward();
  EXPECT_MATCHES(f, "out_relu", out_relu);
  EXPECT_MATCHES(f, "out_max", out_max);
  EXPECT_MATCHES(f, "out_min", out_min);
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_y", y.grad());
  const std::vector<float> got = out_relu.to_vector<float>(), want = f.get("out_relu").to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "element " << i;
}
