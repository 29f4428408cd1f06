// The elementwise ops: arithmetic (broadcasting, scalars, dtype promotion), unary math,
// comparisons, where and masked_fill, clamp (scalar, one-sided, tensor bounds) and the activations
// (relu, sigmoid, tanh, gelu and its tanh form, silu). Values worked out by hand, the float32
// activation backwards against their derivatives in double, PyTorch parity of forward and gradients
// (fixtures from tests/fixtures/make_fixtures.py and make_everyday_fixtures.py) and the errors for
// bad input. The op table (tests/op_table.cpp, Note [The op table]) adds the checks every op gets:
// gradcheck in float64 (broadcasting and the variants included), the float32 and 16-bit columns and
// integer inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::testutil;

using ElementwiseOps = SeededTest<42>;

// --- arithmetic, comparisons, unary math ---

TEST_F(ElementwiseOps, BinaryForwardWithBroadcasting) {
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

TEST_F(ElementwiseOps, ComparisonsAndWhere) {
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

TEST_F(ElementwiseOps, UnaryForward) {
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

// --- activations ---

// The float32 activation backwards (one pass each, Note [Activation backwards in one pass]) against
// g * f'(x) computed in double, over a sweep that reaches the tails and the special values.
// sign stays in the graph with a zero gradient, as PyTorch's: a loss through it alone backs up.
TEST_F(ElementwiseOps, SignHasAZeroGradient) {
  const Tensor x = tensor({-2, 0, 3}).requires_grad_();
  const Tensor y = sign(x);
  EXPECT_TRUE(y.requires_grad());
  sum(y * 5.0).backward();
  expect_near(x.grad(), {0, 0, 0});
  EXPECT_FALSE(sign(from_vector(std::vector<int64_t>{-4, 2}, {2}, kInt64)).requires_grad());
}

TEST_F(ElementwiseOps, ActivationBackwardsMatchTheDerivativeInDouble) {
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
       [&](double v) {
         return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-v * v / 2) / std::sqrt(2 * pi);
       }},
      {"gelu (tanh)", &testutil::gelu_tanh,
       [&](double v) {
         const double c = std::sqrt(2 / pi), t = std::tanh(c * (v + 0.044715 * v * v * v));
         return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
       }},
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

TEST_F(ElementwiseOps, SiluValuesAndGradient) {
  const Tensor x = tensor({-1.0, 0.0, 1.0, 20.0}, kFloat64).requires_grad_();
  Tensor y = silu(x);
  expect_near(y, {-0.2689414213699951, 0.0, 0.7310585786300049, 20.0 / (1.0 + std::exp(-20.0))}, 1e-12);
  sum(y).backward();
  // d/dx x s(x) = s(x) (1 + x (1 - s(x)))
  expect_near(x.grad(), {0.07232948812851325, 0.5, 0.9276705118714867, 1.0000000391619202}, 1e-12);
  EXPECT_GRADCHECK([](auto& v) { return silu(v[0]); }, {leaf({3, 4}, -6.0, 6.0)});
  expect_near(silu(tensor({-1.0, 1.0})), {-0.26894142, 0.73105858});  // float32 kernel
  expect_error([] { silu(zeros({2}, kInt64)); }, "[silu] expects a floating point tensor");
}

void check_silu_parity(const std::string& file) {
  Fixture f = Fixture::load(file);
  Tensor x = fixture_leaf(f, "x");
  Tensor out = silu(x);
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES_FIXTURE(f, "out", out);
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
}
TEST_F(ElementwiseOps, SiluParity) { check_silu_parity("parity_silu.txt"); }
TEST_F(ElementwiseOps, SiluParityFloat64) { check_silu_parity("parity_silu_f64.txt"); }

TEST_F(ElementwiseOps, TanhGeluIsTheApproximation) {
  const Tensor x = tensor({-3, -1, 0, 0.5, 2});
  const double c = std::sqrt(2.0 / std::numbers::pi);
  std::vector<double> want;
  for (double v : values(x)) want.push_back(0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v))));
  expect_near(gelu(x, GeluApproximate::Tanh), want, 1e-6);
  // Not the exact form: they differ by up to about 1e-3.
  EXPECT_GT(max(abs(gelu(x, GeluApproximate::Tanh) - gelu(x))).item(), 1e-4);
  EXPECT_EQ(gelu(x.to(kBFloat16), GeluApproximate::Tanh).dtype(), kBFloat16);
  EXPECT_GRADCHECK([](auto& v) { return gelu(v[0], GeluApproximate::Tanh); }, {leaf({2, 5}, -4, 4)});
}

// --- where, masked_fill ---

TEST_F(ElementwiseOps, MaskedFillBroadcastsTheMask) {
  const Tensor x = arange(6.0).reshape({2, 3}).requires_grad_();
  const Tensor mask = tensor({1, 0, 1}).to(kUInt8);
  Tensor y = masked_fill(x, mask, -7.0);
  expect_near(y, {-7, 1, -7, -7, 4, -7});
  sum(y).backward();
  expect_near(x.grad(), {0, 1, 0, 0, 1, 0});  // filled elements do not depend on x
  EXPECT_GRADCHECK([&](auto& v) { return masked_fill(v[0], mask.reshape({3, 1}), 2.5); }, {leaf({2, 3, 4})});
  expect_error([] { masked_fill(zeros({3}), zeros({2, 3}, kUInt8), 0.0); },
               "[masked_fill] mask of shape [2, 3] does not broadcast to the input shape [3]");
  expect_error([] { masked_fill(zeros({3}), zeros({3}), 0.0); },
               "[masked_fill] mask must be a uint8 mask, got float32");
  expect_error([] { masked_fill(zeros({3}), zeros({4}, kUInt8), 0.0); },
               "[masked_fill] mask of shape [4] does not broadcast to the input shape [3]");
}

TEST_F(ElementwiseOps, WhereBroadcastsAllThreeOperands) {
  const Tensor cond = tensor({1, 0, 0, 1}).to(kUInt8);  // [4]
  Tensor y = where(cond, arange(8.0).reshape({2, 1, 4}), -arange(3.0).reshape({3, 1}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  expect_near(y.select(0, 1), {4, 0, 0, 7, 4, -1, -1, 7, 4, -2, -2, 7});
  EXPECT_GRADCHECK([&](auto& v) { return where(cond, v[0], v[1]); }, {leaf({2, 1, 4}), leaf({3, 1})});
}

TEST_F(ElementwiseOps, WhereRoutesTheGradientForAnyNonzeroCondition) {
  // A condition of 2 selects a (the kernel tests for nonzero); its gradient must follow: 1 to a,
  // 0 to b, not 2 and -1 (which multiplying by the mask would give).
  const Tensor a = ones({3}).requires_grad_(), b = ones({3}).requires_grad_();
  sum(where(tensor({2, 0, 1}).to(kUInt8), a, b)).backward();
  expect_near(a.grad(), {1, 0, 1});
  expect_near(b.grad(), {0, 1, 0});
}

TEST_F(ElementwiseOps, MaskingParity) {
  Fixture f = Fixture::load("parity_masking.txt");
  Tensor x = fixture_leaf(f, "x"), a = fixture_leaf(f, "a"), b = fixture_leaf(f, "b");
  Tensor fill = masked_fill(x, fixture_mask(f, "mask"), -1.5), lower = tril(x, -1), upper = triu(x, 1);
  Tensor chosen = where(fixture_mask(f, "cond"), a, b);
  (sum(fill * f.get("w_fill")) + sum(lower * f.get("w_tril")) + sum(upper * f.get("w_triu")) +
   sum(chosen * f.get("w_where")))
      .backward();
  EXPECT_MATCHES_FIXTURE(f, "out_fill", fill);
  EXPECT_MATCHES_FIXTURE(f, "out_tril", lower);
  EXPECT_MATCHES_FIXTURE(f, "out_triu", upper);
  EXPECT_MATCHES_FIXTURE(f, "out_where", chosen);
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_a", a.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_b", b.grad());
}

// --- clamp: tensor bounds, one bound ---

TEST_F(ElementwiseOps, ClampTensorsValuesAndTies) {
  // Note [Clamp's gradient on a bound]: below lo, x == lo == hi (all to x), lo > hi (all to hi),
  // x on its max (halves), inside.
  const Tensor x = tensor({1, 2, 3, 4, 1}).requires_grad_();
  const Tensor lo = tensor({2, 2, 5, 0, 0}).requires_grad_(), hi = tensor({3, 2, 4, 4, 2}).requires_grad_();
  Tensor y = clamp(x, lo, hi);
  expect_near(y, {2, 2, 4, 4, 1});
  sum(y).backward();
  expect_near(x.grad(), {0, 1, 0, 0.5, 1});
  expect_near(lo.grad(), {1, 0, 0, 0, 0});
  expect_near(hi.grad(), {0, 0, 1, 0.5, 0});
  // One bound only, broadcasting.
  const Tensor m = tensor({-1, 0.5, 3, 7}).reshape({2, 2});
  expect_near(clamp(m, tensor({0, 1}), Tensor()), {0, 1, 3, 7});
  expect_near(clamp(m, Tensor(), tensor({2}).reshape({1, 1})), {-1, 0.5, 2, 2});
  // NaN anywhere gives NaN.
  expect_same_values(clamp(tensor({kNaN, 1, 1}), tensor({0, kNaN, 0}), tensor({1, 2, kNaN})), {kNaN, kNaN, kNaN});
  // Integer operands stay integers; a float bound promotes.
  const Tensor i = from_vector(std::vector<int64_t>{1, 5, 9}, {3}, kInt64);
  const Tensor i_lo = from_vector(std::vector<int64_t>{2, 2, 2}, {3}, kInt64);
  EXPECT_EQ(clamp(i, i_lo, from_vector(std::vector<int64_t>{6, 6, 6}, {3}, kInt64)).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 5, 6}));
  EXPECT_EQ(clamp(i, tensor({2.5}), Tensor()).dtype(), kFloat32);
}

// Every kind of tie against PyTorch 2.15 (tests/fixtures/make_everyday_fixtures.py, case_clamp_ties).
TEST_F(ElementwiseOps, ClampTiesParity) {
  Fixture f = Fixture::load("everyday_clamp_ties.txt");
  Tensor x = fixture_leaf(f, "x"), lo = fixture_leaf(f, "lo"), hi = fixture_leaf(f, "hi");
  Tensor lo_only = fixture_leaf(f, "lo_only"), hi_only = fixture_leaf(f, "hi_only"), half = fixture_leaf(f, "half");
  Tensor out_scalar = clamp(x, -0.5, 0.7), out_crossed = clamp(x, 0.5, -0.5), out_both = clamp(x, lo, hi);
  Tensor out_min = clamp(x, lo_only, Tensor()), out_max = clamp(x, Tensor(), hi_only);
  Tensor out_half = clamp(half.to(kBFloat16), -0.5, 0.7).to(kFloat32);
  EXPECT_MATCHES_FIXTURE(f, "out_scalar", out_scalar);
  EXPECT_MATCHES_FIXTURE(f, "out_crossed", out_crossed);
  EXPECT_MATCHES_FIXTURE(f, "out_both", out_both);
  EXPECT_MATCHES_FIXTURE(f, "out_min", out_min);
  EXPECT_MATCHES_FIXTURE(f, "out_max", out_max);
  EXPECT_MATCHES_FIXTURE(f, "out_half", out_half);
  (sum(out_scalar * f.get("w_scalar")) + sum(out_crossed * f.get("w_crossed")) + sum(out_both * f.get("w_both")) +
   sum(out_min * f.get("w_min")) + sum(out_max * f.get("w_max")) + sum(out_half * f.get("w_half")))
      .backward();
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_lo", lo.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_hi", hi.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_lo_only", lo_only.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_hi_only", hi_only.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_half", half.grad());
}

// NaN in clamp's operands, against PyTorch 2.15: the gradient goes where no comparison excluded it.
TEST_F(ElementwiseOps, ClampNaNGradients) {
  const Tensor x = tensor({kNaN, 0, 2, 0.5}).requires_grad_();
  const Tensor lo = tensor({1, kNaN, kNaN, 1}).requires_grad_(), hi = tensor({0, 0, 0, kNaN}).requires_grad_();
  Tensor y = clamp(x, lo, hi);
  expect_same_values(y, {kNaN, kNaN, kNaN, kNaN});
  sum(y).backward();
  expect_near(x.grad(), {1, 1, 0, 0});
  expect_near(lo.grad(), {0, 0, 0, 0});
  expect_near(hi.grad(), {1, 0, 0, 0});
  // One tensor bound is maximum / minimum: a NaN on either side gives both all of it.
  const Tensor x1 = tensor({kNaN, 1}).requires_grad_(), lo1 = tensor({0, kNaN}).requires_grad_();
  sum(clamp(x1, lo1, Tensor())).backward();
  expect_near(x1.grad(), {1, 1});
  expect_near(lo1.grad(), {1, 1});
  // A scalar clamp passes nothing to a NaN x, and a NaN bound makes every result NaN.
  const Tensor x2 = tensor({kNaN, 1}).requires_grad_();
  sum(clamp(x2, 0.0, 2.0)).backward();
  expect_near(x2.grad(), {0, 1});
  expect_same_values(clamp(tensor({1, 3}), kNaN, 2.0), {kNaN, kNaN});
}

TEST_F(ElementwiseOps, ClampTensorsErrors) {
  expect_error([] { clamp(zeros({2}), Tensor(), Tensor()); },
               "[clamp] needs a min or a max tensor, both are undefined (input shape [2])");
  expect_error([] { clamp(zeros({2, 3}), zeros({2}), Tensor()); },
               "[clamp] shapes [2, 3] and [2] cannot be broadcast together");
  expect_error([] { clamp(zeros({2}), Tensor(), zeros({3})); }, "[clamp] shapes [2] and [3] cannot be broadcast");
}

TEST_F(ElementwiseOps, OneSidedClampsByHand) {
  const Tensor x = tensor({-2, -0.5, 0, 0.5, 2}).requires_grad_();
  expect_near(clamp_min(x, 0.0), {0, 0, 0, 0.5, 2});
  expect_near(clamp_max(x, 0.0), {-2, -0.5, 0, 0, 0});
  expect_near(clamp(x, -0.5, std::nullopt), {-0.5, -0.5, 0, 0.5, 2});
  expect_near(clamp(x, std::nullopt, 0.5), {-2, -0.5, 0, 0.5, 0.5});
  sum(clamp(x, -0.5, std::nullopt)).backward();
  // 0 on the bound itself, as PyTorch 2.15 (Note [Clamp's gradient on a bound]).
  expect_near(x.grad(), {0, 0, 1, 1, 1});
  expect_same_values(clamp_min(tensor({kNaN, -kInf}), 0.0), {kNaN, 0});
  EXPECT_GRADCHECK([](auto& v) { return clamp_max(v[0], 0.3); }, {leaf({3, 4})});
}

TEST_F(ElementwiseOps, OneSidedClampErrors) {
  expect_error([] { clamp(zeros({2}), std::nullopt, std::nullopt); },
               "[clamp] needs a min or a max, both are missing (input shape [2])");
  expect_error([] { clamp_max(Tensor(), 0.0); }, "[clamp_max] input is an undefined tensor");
}

TEST_F(ElementwiseOps, ScalarClampOfIntegersAndCrossedBounds) {
  // Integer bounds the dtype holds keep an integer tensor's dtype; others compute in float32.
  const Tensor ids = from_vector(std::vector<int64_t>{-3, 5, 9}, {3}, kInt64);
  EXPECT_EQ(clamp(ids, 0.0, 6.0).to_vector<int64_t>(), (std::vector<int64_t>{0, 5, 6}));
  EXPECT_EQ(clamp_min(ids, 0.0).to_vector<int64_t>(), (std::vector<int64_t>{0, 5, 9}));
  EXPECT_EQ(clamp_max(ids, 6.0).dtype(), kInt64);
  const Tensor halves = clamp(ids, 2.5, std::nullopt);
  EXPECT_EQ(halves.dtype(), kFloat32);
  expect_near(halves, {2.5, 5, 9});
  const Tensor bytes = from_vector(std::vector<uint8_t>{1, 200}, {2}, kUInt8);
  EXPECT_EQ(clamp(bytes, 5.0, 100.0).to_vector<uint8_t>(), (std::vector<uint8_t>{5, 100}));
  EXPECT_EQ(clamp(bytes, -5.0, std::nullopt).dtype(), kFloat32);  // uint8 cannot hold -5
  // min > max gives max everywhere and no gradient, as in PyTorch.
  const Tensor x = tensor({0, 1.5, 3}).requires_grad_();
  Tensor y = clamp(x, 2.0, 1.0);
  expect_near(y, {1, 1, 1});
  sum(y).backward();
  expect_near(x.grad(), {0, 0, 0});
}

TEST_F(ElementwiseOps, ClampGeluEmbeddingParity) {
  Fixture f = Fixture::load("everyday_clamp_gelu_embedding.txt");
  Tensor x = fixture_leaf(f, "x"), weight = fixture_leaf(f, "weight");
  Tensor out_min = clamp_min(x, 0.5), out_max = clamp(x, std::nullopt, -0.5);
  Tensor out_gelu = gelu(x, GeluApproximate::Tanh), out_emb = embedding(weight, f.get("ids"), -1);
  EXPECT_MATCHES_FIXTURE(f, "out_min", out_min);
  EXPECT_MATCHES_FIXTURE(f, "out_max", out_max);
  EXPECT_MATCHES_FIXTURE(f, "out_gelu", out_gelu);
  EXPECT_MATCHES_FIXTURE(f, "out_emb", out_emb);
  (sum(out_min * f.get("w_min")) + sum(out_max * f.get("w_max")) + sum(out_gelu * f.get("w_gelu")) +
   sum(out_emb * f.get("w_emb")))
      .backward();
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_weight", weight.grad());
}

// Note [Pow at zero] and std's 0 / 0 on a constant row, against PyTorch 2.15 (make_everyday_fixtures.py,
// case_zero_slopes): the gradients PyTorch defines as 0 where the textbook formula gives NaN.
TEST_F(ElementwiseOps, ZeroSlopesParity) {
  Fixture f = Fixture::load("everyday_zero_slopes.txt");
  Tensor a = fixture_leaf(f, "a"), b = fixture_leaf(f, "b"), rows = fixture_leaf(f, "rows");
  Tensor out_pow = pow(a, b), out_pow0 = pow(a, 0.0), out_std = stddev(rows, {1});
  EXPECT_MATCHES_FIXTURE(f, "out_pow", out_pow);
  EXPECT_MATCHES_FIXTURE(f, "out_pow0", out_pow0);
  EXPECT_MATCHES_FIXTURE(f, "out_std", out_std);
  (sum(out_pow * f.get("w_pow")) + sum(out_pow0 * f.get("w_pow0")) + sum(out_std * f.get("w_std"))).backward();
  EXPECT_MATCHES_FIXTURE(f, "grad_a", a.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_b", b.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_rows", rows.grad());
}

// --- errors ---

TEST_F(ElementwiseOps, BadInputThrowsNamingTheOpAndShapes) {
  expect_error([] { zeros({2, 3}) + zeros({4}); }, "[add] shapes [2, 3] and [4] cannot be broadcast together");
  expect_error([] { zeros({2, 3}) * zeros({2, 2}); }, "[mul] shapes [2, 3] and [2, 2] cannot be broadcast");
  expect_error([] { exp(zeros({2}, kInt64)); }, "[exp] expects a floating point tensor, got int64");
  expect_error([] { where(zeros({2}), zeros({2}), zeros({2})); },
               "[where] condition must be a uint8 mask, got float32");
}
