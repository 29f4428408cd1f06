// The first ops: elementwise arithmetic and comparisons, reductions, softmax, matmul, the basic
// losses, indexing and views (test_everyday_ops.cpp and test_transformer_ops.cpp hold the later
// ones). Forward values on small hand-checked inputs, gradcheck (float64 central differences,
// broadcasting included), and the error for bad shapes/dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/generator.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::expect_near;
using testutil::leaf;
using testutil::values;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

namespace {

class Ops : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(42); }
};

}  // namespace

TEST_F(Ops, BinaryForwardWithBroadcasting) {
  Tensor a = tensor({1, 2, 3}), b = tensor({10, 20}).reshape({2, 1});
  expect_near(a + b, {11, 12, 13, 21, 22, 23});
  expect_near(a - b, {-9, -8, -7, -19, -18, -17});
  expect_near(a * b, {10, 20, 30, 20, 40, 60});
  expect_near(b / a, {10, 5, 10.0 / 3, 20, 10, 20.0 / 3});
  expect_near(pow(a, tensor({2, 2, 0.5})), {1, 4, std::sqrt(3.0)});
  expect_near(maximum(a, tensor({2, 2, 2})), {2, 2, 3});
  expect_near(minimum(a, tensor({2, 2, 2})), {1, 2, 2});
  expect_near(a + 1.0, {2, 3, 4});
  expect_near(1.0 - a, {0, -1, -2});
  expect_near(a * 2.0, {2, 4, 6});
  expect_near(a / 2.0, {0.5, 1, 1.5});
  expect_near(6.0 / a, {6, 3, 2});
  EXPECT_EQ((a + b).shape(), (Shape{2, 3}));
  // dtype promotion: int64 + float32 computes in float32; int / int is true division
  Tensor i = arange(3, kInt64);
  EXPECT_EQ((i + a).dtype(), kFloat32);
  EXPECT_EQ((a + tensor({1, 1, 1}, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((i / arange(1, 4, 1, kInt64)).dtype(), kFloat32);
  expect_near(i / arange(1, 4, 1, kInt64), {0, 0.5, 2.0 / 3});
}

TEST_F(Ops, ComparisonsAndWhere) {
  Tensor a = tensor({1, 2, 3}), b = tensor({3, 2, 1});
  EXPECT_EQ((a < b).dtype(), kUInt8);
  expect_near(a < b, {1, 0, 0});
  expect_near(a <= b, {1, 1, 0});
  expect_near(a > b, {0, 0, 1});
  expect_near(a >= b, {0, 1, 1});
  expect_near(a == b, {0, 1, 0});
  expect_near(a != b, {1, 0, 1});
  expect_near(a > 1.5, {0, 1, 1});
  expect_near(where(a > 1.5, a, b), {3, 2, 3});
  expect_near(where(tensor({1, 0}).to(kUInt8).reshape({2, 1}), a, 0.0 * a), {1, 2, 3, 0, 0, 0});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& x) { return where(x[0] > 0.0, x[0] * x[1], x[1]); },
      {leaf({2, 3}), leaf({3})});
}

TEST_F(Ops, UnaryForward) {
  Tensor x = tensor({-1, 0.5, 2});
  expect_near(-x, {1, -0.5, -2});
  expect_near(exp(x), {std::exp(-1.0), std::exp(0.5), std::exp(2.0)});
  expect_near(log(tensor({1, 2})), {0, std::log(2.0)});
  expect_near(sqrt(tensor({4, 2})), {2, std::sqrt(2.0)});
  expect_near(rsqrt(tensor({4})), {0.5});
  expect_near(abs(x), {1, 0.5, 2});
  expect_near(sign(x), {-1, 1, 1});
  expect_near(clamp(x, -0.5, 1), {-0.5, 0.5, 1});
  expect_near(relu(x), {0, 0.5, 2});
  expect_near(leaky_relu(x, 0.1), {-0.1, 0.5, 2});
  expect_near(sigmoid(x), {1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-0.5)), 1 / (1 + std::exp(-2.0))});
  expect_near(tanh(x), {std::tanh(-1.0), std::tanh(0.5), std::tanh(2.0)});
  auto gelu_ref = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  expect_near(gelu(x), {gelu_ref(-1), gelu_ref(0.5), gelu_ref(2)});
  expect_near(pow(x, 2.0), {1, 0.25, 4});
}

TEST_F(Ops, ElementwiseGradcheck) {
  struct Case {
    const char* name;
    Fn fn;
    std::vector<Tensor> inputs;
  };
  std::vector<Case> cases = {
      {"add", [](auto& x) { return x[0] + x[1]; }, {leaf({2, 3}), leaf({3})}},
      {"sub", [](auto& x) { return x[0] - x[1]; }, {leaf({2, 1, 3}), leaf({4, 1})}},
      {"mul", [](auto& x) { return x[0] * x[1]; }, {leaf({2, 3}), leaf({2, 1})}},
      {"div", [](auto& x) { return x[0] / x[1]; }, {leaf({2, 3}), leaf({3}, 0.5, 2)}},
      {"pow", [](auto& x) { return pow(x[0], x[1]); }, {leaf({2, 3}, 0.5, 2), leaf({3})}},
      {"maximum", [](auto& x) { return maximum(x[0], x[1]); }, {leaf({2, 3}), leaf({3})}},
      {"minimum", [](auto& x) { return minimum(x[0], x[1]); }, {leaf({2, 3}), leaf({2, 3})}},
      {"scalar", [](auto& x) { return (2.0 - x[0] * 3.0 + 1.0) / 4.0; }, {leaf({5})}},
      {"rdiv", [](auto& x) { return 2.0 / x[0]; }, {leaf({5}, 0.5, 2)}},
      {"neg", [](auto& x) { return -x[0]; }, {leaf({4})}},
      {"exp", [](auto& x) { return exp(x[0]); }, {leaf({4})}},
      {"log", [](auto& x) { return log(x[0]); }, {leaf({4}, 0.5, 3)}},
      {"sqrt", [](auto& x) { return sqrt(x[0]); }, {leaf({4}, 0.5, 3)}},
      {"rsqrt", [](auto& x) { return rsqrt(x[0]); }, {leaf({4}, 0.5, 3)}},
      {"abs", [](auto& x) { return abs(x[0]); }, {leaf({4})}},
      {"clamp", [](auto& x) { return clamp(x[0], -1, 1); }, {leaf({8})}},
      {"relu", [](auto& x) { return relu(x[0]); }, {leaf({8})}},
      {"leaky_relu", [](auto& x) { return leaky_relu(x[0], 0.2); }, {leaf({8})}},
      {"sigmoid", [](auto& x) { return sigmoid(x[0]); }, {leaf({4})}},
      {"tanh", [](auto& x) { return tanh(x[0]); }, {leaf({4})}},
      {"gelu", [](auto& x) { return gelu(x[0]); }, {leaf({6})}},
      {"pow_scalar", [](auto& x) { return pow(x[0], 3.0); }, {leaf({4})}},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_GRADCHECK(c.fn, c.inputs);
  }
}

// The float32 activation backwards (one pass each, Note [Activation backwards in one pass]) against
// g * f'(x) computed in double, over a sweep that reaches the tails and the special values.
TEST_F(Ops, ActivationBackwardsMatchTheDerivativeInDouble) {
  const double pi = std::acos(-1.0);
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  struct Case {
    const char* name;
    Tensor (*f)(const Tensor&);
    std::function<double(double)> derivative;
  };
  const Case cases[] = {
      {"relu", &relu, [](double v) { return v > 0 ? 1.0 : 0.0; }},
      {"sigmoid", &sigmoid, [&](double v) { return sig(v) * (1 - sig(v)); }},
      {"tanh", &ember::tanh, [](double v) { return 1 - std::tanh(v) * std::tanh(v); }},
      {"silu", &silu, [&](double v) { return sig(v) * (1 + v * (1 - sig(v))); }},
      {"gelu", &gelu,
       [&](double v) { return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-v * v / 2) / std::sqrt(2 * pi); }},
  };
  std::vector<double> xs;
  for (double v = -12; v <= 12; v += 0.0371) xs.push_back(v);
  const Tensor x = from_vector(xs, {static_cast<int64_t>(xs.size())}, kFloat32);
  const Tensor g = randn(x.shape());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor leaf_x = x.clone().requires_grad_();
    c.f(leaf_x).backward(g);
    const std::vector<double> got = values(leaf_x.grad()), xv = values(x), gv = values(g);
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = gv[i] * c.derivative(xv[i]);
      ASSERT_NEAR(got[i], want, 1e-6 + 1e-5 * std::abs(want)) << "x = " << xv[i];
    }
    // NaN in, NaN gradient out (relu passes the gradient of a NaN output, as PyTorch)
    const Tensor nan_x = tensor({NAN}).requires_grad_();
    c.f(nan_x).backward(tensor({2.0}));
    if (std::string(c.name) == "relu") EXPECT_EQ(nan_x.grad().item(), 2.0);
    else EXPECT_TRUE(std::isnan(nan_x.grad().item()));
  }
}

TEST_F(Ops, Reductions) {
  Tensor x = arange(6).reshape({2, 3});
  expect_near(sum(x), {15});
  expect_near(sum(x, {0}), {3, 5, 7});
  expect_near(sum(x, {1}, true), {3, 12});
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  expect_near(sum(x, {-1, 0}), {15});
  expect_near(mean(x, {1}), {1, 4});
  expect_near(max(x, {0}), {3, 4, 5});
  expect_near(min(x, {1}), {0, 3});
  expect_near(max(x), {5});
  Tensor y = tensor({1, 5, 5, 2}).reshape({2, 2});
  EXPECT_EQ(argmax(y, 1).dtype(), kInt64);
  expect_near(argmax(y, 1), {1, 0});
  expect_near(argmax(y, 0, true), {1, 0});
  Tensor z = zeros({2, 3, 4});
  EXPECT_EQ(sum(z, {0, 2}).shape(), (Shape{3}));
  expect_near(sum(arange(24).reshape({2, 3, 4}), {0, 2}), {60, 92, 124});
  expect_near(sum(ones({0, 3}), {0}), {0, 0, 0});
  Tensor mask = ones({1000}) > 0.5;  // uint8
  EXPECT_EQ(sum(mask).dtype(), kInt64);
  EXPECT_EQ(sum(mask).item(), 1000.0);  // no wrap-around at 256
}

TEST_F(Ops, ReductionGradcheck) {
  EXPECT_GRADCHECK([](auto& x) { return sum(x[0]); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return sum(x[0], {0, 2}); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return sum(x[0], {1}, true); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return mean(x[0], {-1}); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return mean(x[0]); }, {leaf({5})});
  EXPECT_GRADCHECK([](auto& x) { return max(x[0], {1}); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return min(x[0], {0, 1}, true); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return softmax(x[0], 1); }, {leaf({3, 5})});
  EXPECT_GRADCHECK([](auto& x) { return softmax(x[0], 0); }, {leaf({3, 5})});
  EXPECT_GRADCHECK([](auto& x) { return log_softmax(x[0], -1); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return log_softmax(x[0], 1); }, {leaf({2, 3, 4})});
}

TEST_F(Ops, MaxSharesTheGradientBetweenTies) {
  Tensor x = tensor({1, 3, 3}).requires_grad_();
  max(x).backward();
  expect_near(x.grad(), {0, 0.5, 0.5});
}

TEST_F(Ops, SoftmaxIsStableAndNormalised) {
  Tensor x = tensor({1000, 1001, 1002});
  Tensor p = softmax(x, 0);
  expect_near(p, {0.09003057, 0.24472847, 0.66524096});
  expect_near(log_softmax(x, 0), {-2.40760596, -1.40760596, -0.40760596});
  expect_near(sum(softmax(randn({4, 7}), 1), {1}), {1, 1, 1, 1});
}

TEST_F(Ops, Matmul) {
  Tensor a = arange(6).reshape({2, 3}), b = arange(12).reshape({3, 4});
  expect_near(matmul(a, b), {20, 23, 26, 29, 56, 68, 80, 92});
  expect_near(matmul(tensor({1, 2, 3}), b), {32, 38, 44, 50});
  expect_near(matmul(a, tensor({1, 1, 1})), {3, 12});
  expect_near(matmul(tensor({1, 2}), tensor({3, 4})), {11});
  EXPECT_EQ(matmul(tensor({1, 2}), tensor({3, 4})).dim(), 0);
  expect_near(matmul(b.t(), a.t()), values(matmul(a, b).t().contiguous()));
  Tensor batched = matmul(randn({5, 2, 3, 4}), randn({2, 4, 6}));
  EXPECT_EQ(batched.shape(), (Shape{5, 2, 3, 6}));
  // batched against a per-batch loop
  Tensor p = randn({3, 2, 4}), q = randn({3, 4, 5});
  Tensor pq = matmul(p, q);
  for (int64_t i = 0; i < 3; ++i) expect_near(pq.select(0, i), values(matmul(p.select(0, i), q.select(0, i))), 1e-5);
}

TEST_F(Ops, MatmulGradcheck) {
  EXPECT_GRADCHECK([](auto& x) { return matmul(x[0], x[1]); }, {leaf({3, 4}), leaf({4, 2})});
  EXPECT_GRADCHECK([](auto& x) { return matmul(x[0].t(), x[1]); }, {leaf({4, 3}), leaf({4, 2})});
  EXPECT_GRADCHECK([](auto& x) { return matmul(x[0], x[1]); }, {leaf({2, 3, 4}), leaf({4, 5})});
  EXPECT_GRADCHECK([](auto& x) { return matmul(x[0], x[1]); }, {leaf({2, 1, 3, 4}), leaf({3, 4, 2})});
  EXPECT_GRADCHECK([](auto& x) { return matmul(x[0], x[1]); }, {leaf({4}), leaf({4, 3})});
  EXPECT_GRADCHECK([](auto& x) { return matmul(x[0], x[1]); }, {leaf({2, 4}), leaf({4})});
  EXPECT_GRADCHECK([](auto& x) { return matmul(x[0], x[1]); }, {leaf({4}), leaf({4})});
  // linear: the bias goes into the product (Note [A bias in the product]); 1-D, 2-D and 3-D inputs
  EXPECT_GRADCHECK([](auto& x) { return linear(x[0], x[1], x[2]); }, {leaf({3, 4}), leaf({2, 4}), leaf({2})});
  EXPECT_GRADCHECK([](auto& x) { return linear(x[0], x[1], x[2]); }, {leaf({2, 3, 4}), leaf({5, 4}), leaf({5})});
  EXPECT_GRADCHECK([](auto& x) { return linear(x[0], x[1], x[2]); }, {leaf({4}), leaf({3, 4}), leaf({3})});
  EXPECT_GRADCHECK([](auto& x) { return linear(x[0], x[1]); }, {leaf({3, 4}), leaf({2, 4})});
  const Tensor x = randn({2, 3, 4}), w = randn({5, 4}), b = randn({5});
  expect_near(linear(x, w, b), values(matmul(x, w.t()) + b), 1e-5);
  expect_near(linear(tensor({1, 2}), tensor({1, 1, 0, 1}).reshape({2, 2}), tensor({10, 20})), {13, 22});
  expect_near(linear(zeros({2, 0}), zeros({3, 0}), tensor({1, 2, 3})), {1, 2, 3, 1, 2, 3});  // an empty sum: the bias
}

TEST_F(Ops, Losses) {
  Tensor logits = tensor({1, 2, 3, 1, 1, 1}).reshape({2, 3});
  Tensor target = from_vector(std::vector<int64_t>{2, 0}, {2}, kInt64);
  double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3, l1 = std::log(3.0);
  expect_near(cross_entropy(logits, target), {(l0 + l1) / 2});
  expect_near(cross_entropy(logits, target, Reduction::Sum), {l0 + l1});
  expect_near(cross_entropy(logits, target, Reduction::None), {l0, l1});
  Tensor ignored = from_vector(std::vector<int64_t>{2, -100}, {2}, kInt64);
  expect_near(cross_entropy(logits, ignored), {l0});  // mean over the targets that count
  // label smoothing: (1 - s) * nll + s * mean over classes of -log p
  double s = 0.1, smooth1 = l1;  // all logits equal: every -log p is log 3
  double smooth0 = (1 - s) * l0 + s * (3 * std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 6) / 3;
  expect_near(cross_entropy(logits, target, Reduction::None, -100, s), {smooth0, smooth1});
  expect_near(mse_loss(tensor({1, 2}), tensor({3, 5})), {6.5});
  expect_near(mse_loss(tensor({1, 2}), tensor({3, 5}), Reduction::Sum), {13});

  Tensor t = from_vector(std::vector<int64_t>{1, 0, 3}, {3}, kInt64);
  Tensor t_ignore = from_vector(std::vector<int64_t>{1, 7, 3}, {3}, kInt64);
  EXPECT_GRADCHECK([&](auto& x) { return cross_entropy(x[0], t); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([&](auto& x) { return cross_entropy(x[0], t, Reduction::Sum, -100, 0.2); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([&](auto& x) { return cross_entropy(x[0], t_ignore, Reduction::Mean, 7); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([&](auto& x) { return cross_entropy(x[0], t, Reduction::None); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return mse_loss(x[0], x[1]); }, {leaf({2, 3}), leaf({2, 3})});
}

TEST_F(Ops, IndexingAndJoining) {
  Tensor x = arange(12).reshape({3, 4});
  Tensor idx = from_vector(std::vector<int64_t>{2, 0, 2}, {3}, kInt64);
  expect_near(index_select(x, 0, idx), {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  expect_near(index_select(x, 1, idx), {2, 0, 2, 6, 4, 6, 10, 8, 10});
  Tensor g = from_vector(std::vector<int64_t>{3, 0, 1, 1, 2, 2}, {3, 2}, kInt64);
  expect_near(gather(x, 1, g), {3, 0, 5, 5, 10, 10});
  expect_near(cat({tensor({1, 2}), tensor({3})}), {1, 2, 3});
  Tensor c = cat({zeros({2, 2}), ones({2, 1})}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  expect_near(c, {0, 0, 1, 0, 0, 1});
  Tensor s = stack({tensor({1, 2}), tensor({3, 4})}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  expect_near(s, {1, 3, 2, 4});

  EXPECT_GRADCHECK([&](auto& v) { return index_select(v[0], 0, idx); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([&](auto& v) { return index_select(v[0], 1, idx); }, {leaf({2, 4, 3})});
  EXPECT_GRADCHECK([&](auto& v) { return gather(v[0], 1, g); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return cat({v[0], v[1] * 2.0}, 1); }, {leaf({2, 3}), leaf({2, 2})});
  EXPECT_GRADCHECK([](auto& v) { return stack({v[0], v[1]}, 0); }, {leaf({2, 3}), leaf({2, 3})});
}

TEST_F(Ops, ViewGradcheck) {
  EXPECT_GRADCHECK([](auto& x) { return x[0].reshape({4, 3}) * 2.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].t().reshape({12}); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].permute({2, 0, 1}) * 1.0; }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].narrow(1, 1, 2) * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].slice(1, 0, 4, 2) * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].select(0, 1) * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].expand({3, 2, 4}) * 1.0; }, {leaf({2, 1})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].unsqueeze(1).squeeze() * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].flatten() * 1.0; }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].t().contiguous(); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].clone(); }, {leaf({3})});
  // through float32 the finite differences are only good to ~1e-4
  EXPECT_GRADCHECK([](auto& x) { return x[0].to(kFloat32).to(kFloat64); }, {leaf({3})}, 1e-2, 1e-3, 1e-3);
}

// Note [Checked size arithmetic]: ops whose output shape adds or broadcasts sizes.
TEST_F(Ops, OutputShapesWhoseSizeOverflowsAreErrors) {
  const int64_t big = int64_t{1} << 32;
  const Tensor column = zeros({1, 1}).expand({big, 1}), row = zeros({1, 1}).expand({1, big});
  const Tensor mask = zeros({1, 1}, kUInt8).expand({big, 1});
  expect_error([&] { return column + row; }, "[add] shape [4294967296, 4294967296] is too large");
  expect_error([&] { return where(mask, column, row); }, "[where] shape [4294967296, 4294967296] is too large");
  const Tensor huge = zeros({1}).expand({int64_t{1} << 62});
  expect_error([&] { cat({huge, huge}, 0); },
               "[cat] the sizes along dim 0 of the 2 tensors (tensor 0 of shape [4611686018427387904]) add up to more "
               "than int64 holds");
  expect_error([&] { stack({huge, huge}, 1); }, "[empty] shape [4611686018427387904, 2] is too large");
}

TEST_F(Ops, BadInputThrowsNamingTheOpAndShapes) {
  expect_error([] { zeros({2, 3}) + zeros({4}); }, "[add] shapes [2, 3] and [4] cannot be broadcast together");
  expect_error([] { zeros({2, 3}) * zeros({2, 2}); }, "[mul] shapes [2, 3] and [2, 2] cannot be broadcast");
  expect_error([] { matmul(zeros({2, 3}), zeros({4, 5})); }, "[matmul] shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  expect_error([] { matmul(zeros({2, 3}), zeros({3, 5}, kFloat64)); }, "[matmul] expected one dtype, got float32 and float64");
  expect_error([] { matmul(zeros({2, 3}, kInt64), zeros({3, 5}, kInt64)); }, "[matmul] expects a floating point tensor, got int64");
  expect_error([] { matmul(zeros({2, 3, 4}), zeros({5, 4, 2})); }, "[matmul] shapes [2] and [5] cannot be broadcast");
  expect_error([] { matmul(scalar_tensor(1), zeros({2})); }, "[matmul] both arguments need at least 1 dim");
  expect_error([] { linear(zeros({2, 3}), zeros({4, 5}), zeros({4})); },
               "[linear] input of shape [2, 3] does not match the weight's in_features 5 (weight [4, 5])");
  expect_error([] { linear(zeros({2, 3}), zeros({4, 3}), zeros({3})); },
               "[linear] bias of shape [3] does not match the weight's out_features 4 (weight [4, 3])");
  expect_error([] { linear(zeros({2, 3}), zeros({3}), Tensor()); },
               "[linear] expects a 2-D weight [out_features, in_features], got shape [3]");
  expect_error([] { linear(zeros({2, 3}), zeros({4, 3}), zeros({4}, kFloat64)); },
               "[linear] expected one dtype, got input float32, weight float32 and bias float64");
  expect_error([] { sum(zeros({2, 3}), {2}); }, "[sum] dim 2 is out of range for a tensor with 2 dim(s)");
  expect_error([] { sum(zeros({2, 3}), {1, -1}); }, "[sum] dim [1, -1] names a dim more than once");
  expect_error([] { softmax(zeros({2, 3}), 3); }, "[softmax] dim 3 is out of range");
  expect_error([] { softmax(zeros({2}, kInt64), 0); }, "[softmax] expects a floating point tensor, got int64");
  expect_error([] { max(zeros({0})); }, "[max] cannot reduce an empty tensor of shape [0]");
  expect_error([] { exp(zeros({2}, kInt64)); }, "[exp] expects a floating point tensor, got int64");
  Tensor logits = zeros({2, 3});
  expect_error([&] { cross_entropy(logits, zeros({2}, kInt64).reshape({1, 2})); }, "[cross_entropy] target of shape [1, 2] does not match logits of shape [2, 3]");
  expect_error([&] { cross_entropy(logits, zeros({2})); }, "[cross_entropy] expects int64 class indices as target, got float32");
  expect_error([&] { cross_entropy(logits, full({2}, 3, kInt64)); }, "[cross_entropy] target 3 is out of range for 3 classes");
  expect_error([&] { cross_entropy(zeros({3}), zeros({3}, kInt64)); }, "[cross_entropy] expects logits of shape [N, C], got [3]");
  expect_error([] { mse_loss(zeros({2}), zeros({3})); }, "[mse_loss] input of shape [2] and target of shape [3] differ");
  Tensor idx = from_vector(std::vector<int64_t>{0, 5}, {2}, kInt64);
  expect_error([&] { index_select(zeros({3, 2}), 0, idx); }, "[index_select] index 5 is out of range for dim 0 of size 3");
  expect_error([&] { index_select(zeros({3, 2}), 0, zeros({2})); }, "[index_select] index must be int64, got float32");
  expect_error([&] { gather(zeros({3, 2}), 1, zeros({3}, kInt64)); }, "[gather] index of shape [3] must have as many dims");
  expect_error([] { cat({zeros({2, 3}), zeros({2, 4})}, 0); }, "[cat] tensor 1 of shape [2, 4] does not match tensor 0 of shape [2, 3] outside dim 0");
  expect_error([] { cat({zeros({2}), zeros({2}, kInt64)}); }, "[cat] tensor 1 is int64 on cpu but tensor 0 is float32 on cpu");
  expect_error([] { cat({}); }, "[cat] expects a non-empty list");
  expect_error([] { stack({zeros({2}), zeros({3})}); }, "[stack] tensor 1 of shape [3] differs from tensor 0 of shape [2]");
  expect_error([] { where(zeros({2}), zeros({2}), zeros({2})); }, "[where] condition must be a uint8 mask, got float32");
  expect_error([] { clamp(zeros({2}), 1, 0); }, "[clamp] min (1) must not exceed max (0)");
}

TEST_F(Ops, ThreadCountIsSettable) {
  int before = get_num_threads();
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  Tensor a = randn({300, 300});
  Tensor single = matmul(a, a);
  set_num_threads(2);
  expect_near(matmul(a, a), values(single), 1e-3);
  set_num_threads(before);
  expect_error([] { set_num_threads(0); }, "[set_num_threads] expects a positive thread count, got 0");
}
