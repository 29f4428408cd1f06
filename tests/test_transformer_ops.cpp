// The ops a small GPT needs: silu, layer_norm, embedding, masked_fill/where, tril/triu,
// var/std, chunk/split and scaled_dot_product_attention. For each: forward values checked by
// hand, gradcheck (float64 central differences), PyTorch parity of forward and gradients
// (fixtures from tests/fixtures/make_fixtures.py) and the errors for bad input.
#include <gtest/gtest.h>

#include <any>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "core/autograd/engine.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/saved_tensor.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::expect_near;
using testutil::leaf;
using testutil::Fixture;
using testutil::values;

namespace {

testutil::Tol tol_for(const Tensor& t) { return t.dtype() == kFloat64 ? testutil::kFloat64Tol : testutil::kFloat32Tol; }

#define EXPECT_MATCHES(f, name, got) EXPECT_TRUE(testutil::all_close(name, got, (f).get(name), tol_for(got)))

Tensor fixture_leaf(const Fixture& f, const std::string& name) { return f.get(name).requires_grad_(); }
// The fixtures store 0/1 masks as int64.
Tensor fixture_mask(const Fixture& f, const std::string& name) { return f.get(name).to(kUInt8); }

// Every tensor saved for backward while it is alive, seen through the saved-tensor hooks.
struct SavedTensors {
  std::vector<Tensor> tensors;
  autograd::SavedTensorHooks hooks() {
    return {[this](const Tensor& t) -> std::any {
              tensors.push_back(t);
              return t;
            },
            [](const std::any& p) { return std::any_cast<Tensor>(p); }};
  }
  // Bytes of the distinct saved tensors (a tensor saved twice counts once).
  int64_t distinct_bytes() const {
    std::set<const void*> seen;
    int64_t bytes = 0;
    for (const Tensor& t : tensors)
      if (seen.insert(t.raw_data()).second) bytes += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
    return bytes;
  }
};

class TransformerOps : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(7); }
};

}  // namespace

// --- silu ---

TEST_F(TransformerOps, SiluValuesAndGradient) {
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
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_x", x.grad());
}
TEST_F(TransformerOps, SiluParity) { check_silu_parity("parity_silu.txt"); }
TEST_F(TransformerOps, SiluParityFloat64) { check_silu_parity("parity_silu_f64.txt"); }

// --- layer_norm ---

TEST_F(TransformerOps, LayerNormValues) {
  // Each row normalised to mean 0 and variance 1 (biased), then scaled and shifted per column.
  const Tensor x = tensor({1, 2, 3, 10, 10, 40}).reshape({2, 3});
  const double a = std::sqrt(1.5);  // 1 / sqrt(2/3): rstd of the first row
  expect_near(layer_norm(x, {3}, Tensor(), Tensor(), 1e-12), {-a, 0, a, -1 / std::sqrt(2.0), -1 / std::sqrt(2.0),
                                                              std::sqrt(2.0)}, 1e-5);
  expect_near(layer_norm(x, {3}, tensor({1, 2, 3}), tensor({0, 0, 1}), 1e-12), {-a, 0, 3 * a + 1, -1 / std::sqrt(2.0),
                                                                                 -2 / std::sqrt(2.0),
                                                                                 3 * std::sqrt(2.0) + 1}, 1e-5);
  // Over two trailing dims: all six values are one row.
  expect_near(mean(layer_norm(x, {2, 3})), {0.0}, 1e-6);
  // A large mean next to a small spread: the shifted sums keep the variance (Note [Layer-norm statistics]).
  expect_near(layer_norm(tensor({10000.0, 10001.0, 10002.0}), {3}, Tensor(), Tensor(), 1e-12), {-a, 0, a}, 1e-4);
  // A constant row has variance 0: normalised to 0 (x - mean = 0), not NaN.
  expect_near(layer_norm(full({1, 4}, 3.0), {4}), {0, 0, 0, 0});
}

TEST_F(TransformerOps, LayerNormGradcheck) {
  EXPECT_GRADCHECK([](auto& v) { return layer_norm(v[0], {3, 4}, v[1], v[2]); },
                   {leaf({2, 3, 4}), leaf({3, 4}), leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return layer_norm(v[0], {5}, Tensor(), Tensor(), 1e-3); }, {leaf({4, 5})});
  EXPECT_GRADCHECK([](auto& v) { return layer_norm(v[0], {5}, v[1]); }, {leaf({3, 5}), leaf({5})});
  // A weight with no gradient wanted: the others still get theirs.
  const Tensor weight = rand({5}, kFloat64);
  EXPECT_GRADCHECK([&](auto& v) { return layer_norm(v[0], {5}, weight, v[1]); }, {leaf({2, 5}), leaf({5})});
}

TEST_F(TransformerOps, LayerNormSavesInputAndRowStatistics) {
  SavedTensors saved;
  const Tensor x = leaf({4, 3, 8}), weight = leaf({8}), bias = leaf({8});
  Tensor y;
  {
    autograd::SavedTensorHooksGuard guard(saved.hooks());
    y = layer_norm(x, {8}, weight, bias);
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : saved.tensors) shapes.push_back(t.shape());
  EXPECT_EQ(shapes, (std::vector<Shape>{{4, 3, 8}, {8}, {12}, {12}}));  // x, weight, mean, rstd
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), x.shape());
}

TEST_F(TransformerOps, LayerNormErrors) {
  expect_error([] { layer_norm(zeros({2, 3}), {2}); },
               "[layer_norm] normalized_shape [2] must be the trailing dims of the input of shape [2, 3]");
  expect_error([] { layer_norm(zeros({2, 3}), {}); }, "[layer_norm] normalized_shape [] must be the trailing dims");
  expect_error([] { layer_norm(zeros({3}), {2, 3}); }, "must be the trailing dims of the input of shape [3]");
  expect_error([] { layer_norm(zeros({2, 3}), {3}, zeros({2})); },
               "[layer_norm] weight of shape [2] must have the normalized shape [3]");
  expect_error([] { layer_norm(zeros({2, 3}), {3}, Tensor(), zeros({3}, kFloat64)); },
               "[layer_norm] bias is float64 but the input is float32");
  expect_error([] { layer_norm(zeros({2, 3}), {3}, Tensor(), Tensor(), 0.0); },
               "[layer_norm] eps must be finite and > 0, got 0");
  expect_error([] { layer_norm(zeros({2, 3}, kInt64), {3}); }, "[layer_norm] expects a floating point tensor");
}

void check_layer_norm_parity(const std::string& file) {
  Fixture f = Fixture::load(file);
  Tensor x = fixture_leaf(f, "x"), weight = fixture_leaf(f, "weight"), bias = fixture_leaf(f, "bias");
  Tensor out = layer_norm(x, {4, 6}, weight, bias, 1e-5);
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_weight", weight.grad());
  EXPECT_MATCHES(f, "grad_bias", bias.grad());
  Tensor xp = fixture_leaf(f, "x");
  Tensor plain = layer_norm(xp, {6}, Tensor(), Tensor(), 1e-3);
  sum(plain * f.get("w")).backward();
  EXPECT_MATCHES(f, "out_plain", plain);
  EXPECT_MATCHES(f, "grad_plain_x", xp.grad());
}
TEST_F(TransformerOps, LayerNormParity) { check_layer_norm_parity("parity_layer_norm.txt"); }
TEST_F(TransformerOps, LayerNormParityFloat64) { check_layer_norm_parity("parity_layer_norm_f64.txt"); }

// --- embedding ---

TEST_F(TransformerOps, EmbeddingLooksUpRowsAndAddsRepeatedGradients) {
  const Tensor weight = arange(8.0).reshape({4, 2}).requires_grad_();
  const Tensor ids = from_vector(std::vector<int64_t>{2, 0, 2, 3, 2, 1}, {2, 3}, kInt64);
  Tensor y = embedding(weight, ids);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  expect_near(y, {4, 5, 0, 1, 4, 5, 6, 7, 4, 5, 2, 3});
  sum(y * arange(12.0).reshape({2, 3, 2})).backward();
  // row 2 gets the gradient rows 0, 2 and 4: (0+4+8, 1+5+9)
  expect_near(weight.grad(), {2, 3, 10, 11, 12, 15, 6, 7});
  // A scalar id gives one row of shape [dim]; an empty id list gives [0, dim].
  EXPECT_EQ(embedding(weight, scalar_tensor(1, kInt64)).shape(), (Shape{2}));
  EXPECT_EQ(embedding(weight, zeros({0}, kInt64)).shape(), (Shape{0, 2}));
}

TEST_F(TransformerOps, EmbeddingGradcheck) {
  const Tensor ids = from_vector(std::vector<int64_t>{1, 4, 1, 0, 4, 4}, {3, 2}, kInt64);
  EXPECT_GRADCHECK([&](auto& v) { return embedding(v[0], ids); }, {leaf({5, 3})});
}

TEST_F(TransformerOps, EmbeddingBackwardOfManyIdsIsTheSumPerRow) {
  // 4000 ids over 50 rows: each row's gradient is the sum of its gradient rows, in id order.
  const Tensor weight = zeros({50, 33}).requires_grad_();
  const Tensor ids = randint(0, 50, {40, 100});
  const Tensor g = randn({40, 100, 33});
  sum(embedding(weight, ids) * g).backward();
  const std::vector<int64_t> id = ids.to_vector<int64_t>();
  const std::vector<float> gv = g.to_vector<float>();
  std::vector<float> want(50 * 33, 0.0f);
  for (size_t j = 0; j < id.size(); ++j)
    for (size_t c = 0; c < 33; ++c) want[static_cast<size_t>(id[j]) * 33 + c] += gv[j * 33 + c];
  EXPECT_EQ(weight.grad().to_vector<float>(), want);  // bitwise: the same additions in the same order
}

TEST_F(TransformerOps, EmbeddingErrors) {
  const Tensor weight = zeros({5, 3});
  expect_error([&] { embedding(weight, tensor({1, 5}).to(kInt64)); },
               "[embedding] id 5 is out of range for a table of 5 embeddings (weight shape [5, 3])");
  expect_error([&] { embedding(weight, tensor({-1}).to(kInt64)); }, "[embedding] id -1 is out of range");
  expect_error([&] { embedding(weight, tensor({1, 2})); }, "[embedding] indices must be int64, got float32");
  expect_error([] { embedding(zeros({5}), zeros({2}, kInt64)); },
               "[embedding] weight must be a 2-D table [num_embeddings, dim], got shape [5]");
  expect_error([] { embedding(zeros({5, 2}, kInt64), zeros({2}, kInt64)); }, "[embedding] expects a floating point");
}

TEST_F(TransformerOps, EmbeddingParity) {
  Fixture f = Fixture::load("parity_embedding.txt");
  Tensor weight = fixture_leaf(f, "weight");
  Tensor out = embedding(weight, f.get("indices"));
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES(f, "out", out);
  EXPECT_MATCHES(f, "grad_weight", weight.grad());
}

// --- masked_fill, where, tril, triu ---

TEST_F(TransformerOps, MaskedFillBroadcastsTheMask) {
  const Tensor x = arange(6.0).reshape({2, 3}).requires_grad_();
  const Tensor mask = tensor({1, 0, 1}).to(kUInt8);
  Tensor y = masked_fill(x, mask, -7.0);
  expect_near(y, {-7, 1, -7, -7, 4, -7});
  sum(y).backward();
  expect_near(x.grad(), {0, 1, 0, 0, 1, 0});  // filled elements do not depend on x
  EXPECT_GRADCHECK([&](auto& v) { return masked_fill(v[0], mask.reshape({3, 1}), 2.5); }, {leaf({2, 3, 4})});
  expect_error([] { masked_fill(zeros({3}), zeros({2, 3}, kUInt8), 0.0); },
               "[masked_fill] mask of shape [2, 3] does not broadcast to the input shape [3]");
  expect_error([] { masked_fill(zeros({3}), zeros({3}), 0.0); }, "[masked_fill] mask must be a uint8 mask, got float32");
  expect_error([] { masked_fill(zeros({3}), zeros({4}, kUInt8), 0.0); },
               "[masked_fill] mask of shape [4] does not broadcast to the input shape [3]");
}

TEST_F(TransformerOps, WhereBroadcastsAllThreeOperands) {
  const Tensor cond = tensor({1, 0, 0, 1}).to(kUInt8);  // [4]
  Tensor y = where(cond, arange(8.0).reshape({2, 1, 4}), -arange(3.0).reshape({3, 1}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  expect_near(y.select(0, 1), {4, 0, 0, 7, 4, -1, -1, 7, 4, -2, -2, 7});
  EXPECT_GRADCHECK([&](auto& v) { return where(cond, v[0], v[1]); }, {leaf({2, 1, 4}), leaf({3, 1})});
}

TEST_F(TransformerOps, WhereRoutesTheGradientForAnyNonzeroCondition) {
  // A condition of 2 selects a (the kernel tests for nonzero); its gradient must follow: 1 to a,
  // 0 to b, not 2 and -1 (which multiplying by the mask would give).
  const Tensor a = ones({3}).requires_grad_(), b = ones({3}).requires_grad_();
  sum(where(tensor({2, 0, 1}).to(kUInt8), a, b)).backward();
  expect_near(a.grad(), {1, 0, 1});
  expect_near(b.grad(), {0, 1, 0});
}

TEST_F(TransformerOps, TrilAndTriuKeepATriangleOfTheLastTwoDims) {
  const Tensor x = (arange(12.0) + 1.0).reshape({3, 4});
  expect_near(tril(x), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  expect_near(tril(x, 1), {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  expect_near(tril(x, -1), {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  expect_near(triu(x), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  expect_near(triu(x, 2), {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0});
  expect_near(triu(x, -1), {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  // Batched: every matrix of the batch gets the same triangle.
  expect_near(sum(tril(ones({2, 3, 3})), {1, 2}), {6, 6});
  EXPECT_GRADCHECK([](auto& v) { return tril(v[0], -1); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return triu(v[0], 1); }, {leaf({4, 3})});
  expect_error([] { tril(zeros({3})); }, "[tril] expects a tensor of at least 2 dims, got shape [3]");
  expect_error([] { triu(zeros({})); }, "[triu] expects a tensor of at least 2 dims, got shape []");
}

TEST_F(TransformerOps, CausalMaskIsTheLowerTriangleOfOnes) {
  const Tensor m = causal_mask(3);
  EXPECT_EQ(m.dtype(), kUInt8);
  expect_near(m, {1, 0, 0, 1, 1, 0, 1, 1, 1});
  expect_error([] { causal_mask(-1); }, "[causal_mask] size must be >= 0, got -1");
}

TEST_F(TransformerOps, MaskingParity) {
  Fixture f = Fixture::load("parity_masking.txt");
  Tensor x = fixture_leaf(f, "x"), a = fixture_leaf(f, "a"), b = fixture_leaf(f, "b");
  Tensor fill = masked_fill(x, fixture_mask(f, "mask"), -1.5), lower = tril(x, -1), upper = triu(x, 1);
  Tensor chosen = where(fixture_mask(f, "cond"), a, b);
  (sum(fill * f.get("w_fill")) + sum(lower * f.get("w_tril")) + sum(upper * f.get("w_triu")) +
   sum(chosen * f.get("w_where")))
      .backward();
  EXPECT_MATCHES(f, "out_fill", fill);
  EXPECT_MATCHES(f, "out_tril", lower);
  EXPECT_MATCHES(f, "out_triu", upper);
  EXPECT_MATCHES(f, "out_where", chosen);
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_a", a.grad());
  EXPECT_MATCHES(f, "grad_b", b.grad());
}

// --- var, std ---

TEST_F(TransformerOps, VarAndStdValues) {
  const Tensor x = tensor({1, 2, 3, 4, 2, 4, 6, 8}).reshape({2, 4});
  expect_near(var(x, {1}), {5.0 / 3.0, 20.0 / 3.0});          // unbiased: / (4 - 1)
  expect_near(var(x, {1}, 0), {1.25, 5.0});                   // biased: / 4
  expect_near(var(x, {}), {var(x.reshape({8}), {0}).item<double>()});  // empty dims: all of them
  expect_near(stddev(x, {0}, 1, true), {std::sqrt(0.5), std::sqrt(2.0), std::sqrt(4.5), std::sqrt(8.0)});
  EXPECT_EQ(stddev(x, {0}, 1, true).shape(), (Shape{1, 4}));
  // N <= correction divides by zero, as PyTorch: 0 / 0 is NaN, a positive sum / 0 is inf.
  EXPECT_TRUE(std::isnan(var(tensor({3}), {0}).item<double>()));
  EXPECT_TRUE(std::isinf(var(tensor({1, 2}), {0}, 2).item<double>()));
}

TEST_F(TransformerOps, VarAndStdGradcheck) {
  EXPECT_GRADCHECK([](auto& v) { return var(v[0], {0, 2}); }, {leaf({3, 4, 5})});
  EXPECT_GRADCHECK([](auto& v) { return var(v[0], {-1}, 0, true); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return stddev(v[0], {1}); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return stddev(v[0], {}, 0); }, {leaf({2, 3})});
}

TEST_F(TransformerOps, VarErrors) {
  expect_error([] { var(zeros({3}, kInt64), {0}); }, "[var] expects a floating point tensor");
  expect_error([] { var(zeros({3}), {0}, -1); }, "[var] correction must be >= 0, got -1");
  expect_error([] { var(zeros({3}), {1}); }, "[var] dim 1 is out of range");
  expect_error([] { stddev(zeros({3, 2}), {0, 0}); }, "[var] dim [0, 0] names a dim more than once");
}

TEST_F(TransformerOps, VarStdParity) {
  Fixture f = Fixture::load("parity_var_std.txt");
  Tensor x = fixture_leaf(f, "x");
  Tensor v = var(x, {0, 2}), s = stddev(x, {1}, 0, true);
  (sum(v * f.get("w_var")) + sum(s * f.get("w_std"))).backward();
  EXPECT_MATCHES(f, "out_var", v);
  EXPECT_MATCHES(f, "out_std", s);
  EXPECT_MATCHES(f, "grad_x", x.grad());
}

// --- chunk, split ---

TEST_F(TransformerOps, ChunkAndSplitReturnViews) {
  const Tensor x = arange(14.0).reshape({7, 2});
  std::vector<Tensor> c = chunk(x, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(c[2].shape(), (Shape{1, 2}));
  expect_near(c[2], {12, 13});
  EXPECT_EQ(c[1].raw_data(), x.narrow(0, 3, 3).raw_data());  // a view, no copy
  EXPECT_EQ(chunk(x, 4).size(), 4u);                         // 2, 2, 2, 1
  EXPECT_EQ(chunk(arange(6.0), 4).size(), 3u);               // 2, 2, 2: fewer than asked, as PyTorch
  std::vector<Tensor> s = split(x, 3);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].shape(), (Shape{1, 2}));
  std::vector<Tensor> cols = split(x, Shape{1, 1}, -1);
  expect_near(cols[1], {1, 3, 5, 7, 9, 11, 13});
  EXPECT_EQ(split(x, Shape{0, 7}, 0)[0].shape(), (Shape{0, 2}));
}

TEST_F(TransformerOps, ChunkAndSplitGradcheck) {
  EXPECT_GRADCHECK([](auto& v) {
    std::vector<Tensor> p = chunk(v[0], 3, 1);
    return p[0] * 2.0 + p[2] * p[1];
  }, {leaf({2, 6})});
  EXPECT_GRADCHECK([](auto& v) {
    std::vector<Tensor> p = split(v[0], Shape{2, 1, 2}, 0);
    return sum(p[0]) * sum(p[2]);  // the middle piece gets no gradient
  }, {leaf({5, 3})});
}

TEST_F(TransformerOps, ChunkAndSplitErrors) {
  expect_error([] { split(zeros({5, 2}), Shape{2, 2}); },
               "[split] sizes [2, 2] add up to 4 but dim 0 of the input of shape [5, 2] has size 5");
  expect_error([] { split(zeros({5}), Shape{6, -1}); }, "[split] sizes [6, -1] must not be negative");
  expect_error([] { split(zeros({5}), 0); }, "[split] split_size must be > 0, got 0");
  expect_error([] { chunk(zeros({5}), 0); }, "[chunk] chunks must be > 0, got 0");
  expect_error([] { chunk(scalar_tensor(1.0), 2); }, "[chunk] cannot chunk a 0-dim tensor");
  expect_error([] { split(zeros({5}), 2, 1); }, "[split] dim 1 is out of range");
}

TEST_F(TransformerOps, ChunkSplitParity) {
  Fixture f = Fixture::load("parity_chunk_split.txt");
  Tensor x = fixture_leaf(f, "x");
  std::vector<Tensor> pieces = chunk(x, 3, 0);
  for (const Tensor& t : split(x, Shape{1, 3}, 1)) pieces.push_back(t);
  const std::vector<std::string> names = {"chunk0", "chunk1", "chunk2", "split0", "split1"};
  ASSERT_EQ(pieces.size(), names.size());
  Tensor loss = zeros({});
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_MATCHES(f, "out_" + names[i], pieces[i]);
    loss = loss + sum(pieces[i] * f.get("w_" + names[i]));
  }
  loss.backward();
  EXPECT_MATCHES(f, "grad_x", x.grad());
}

// --- scaled_dot_product_attention ---

TEST_F(TransformerOps, AttentionIsSoftmaxOfScaledScoresTimesValues) {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  const Tensor plain = matmul(softmax(matmul(q, k.transpose(1, 2)) * 0.5, -1), v);
  EXPECT_TRUE(testutil::all_close("default scale", scaled_dot_product_attention(q, k, v), plain, testutil::kFloat32Tol));
  // Causal: the first query sees only the first key, so its output is that key's value.
  const Tensor causal = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  EXPECT_TRUE(testutil::all_close("causal row 0", causal.select(1, 0), v.select(1, 0), testutil::kFloat32Tol));
  // A uint8 mask that allows one key per query: the output is that key's value.
  const Tensor only_key_2 = from_vector({0, 0, 1, 0, 0}, {5}).to(kUInt8);
  const Tensor picked = scaled_dot_product_attention(q, k, v, only_key_2, 0.0, false, 3.0);
  EXPECT_TRUE(testutil::all_close("one key", picked, v.select(1, 2).unsqueeze(1).expand({2, 3, 6}).contiguous(),
                                  testutil::kFloat32Tol));
  // A query that may attend to no key gets zeros and no gradient, as PyTorch's math path since 2.5
  // (Note [Rows that attend to nothing]); plain softmax keeps its NaN.
  for (const Tensor& none : {zeros({5}, kUInt8), full({5}, -INFINITY)}) {
    SCOPED_TRACE(none.dtype() == kUInt8 ? "uint8 mask" : "float mask");
    const Tensor ql = q.detach().requires_grad_();
    const Tensor out = scaled_dot_product_attention(ql, k, v, none);
    EXPECT_EQ(values(out), std::vector<double>(out.numel(), 0.0));
    sum(out).backward();
    EXPECT_EQ(values(ql.grad()), std::vector<double>(q.numel(), 0.0));
  }
  EXPECT_TRUE(std::isnan(values(softmax(full({3}, -INFINITY), -1))[0]));
}

// Dropout drops the attention weights (not the output), from the default generator: the same
// seed gives the same draw as dropout() on the weights would.
TEST_F(TransformerOps, AttentionDropoutDropsTheWeights) {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  manual_seed(7);
  const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.4);
  manual_seed(7);
  const Tensor expected = matmul(dropout(softmax(matmul(q, k.transpose(1, 2)) * 0.5, -1), 0.4), v);
  EXPECT_TRUE(testutil::all_close("dropped", out, expected, testutil::kFloat32Tol));
  EXPECT_FALSE(testutil::all_close("differs from no dropout", out, scaled_dot_product_attention(q, k, v),
                                   testutil::kFloat32Tol));
  EXPECT_EQ(values(scaled_dot_product_attention(q, k, v, Tensor(), 1.0)), std::vector<double>(out.numel(), 0.0));
}

// The argument order before PyTorch's still compiles and means what it meant (causal and a mask
// together: the mask narrowed to the causal pattern).
TEST_F(TransformerOps, DeprecatedAttentionOrderForwards) {
  const Tensor q = randn({2, 4, 3}), k = randn({2, 4, 3}), v = randn({2, 4, 5});
  const Tensor keep = from_vector({1, 0, 1, 1}, {4}).to(kUInt8), bias = randn({4, 4});
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const Tensor old_causal = scaled_dot_product_attention(q, k, v, true);
  const Tensor old_both = scaled_dot_product_attention(q, k, v, true, keep, 0.3);
  const Tensor old_bias = scaled_dot_product_attention(q, k, v, false, bias);
#pragma GCC diagnostic pop
  const Tensor lower = tril(ones({4, 4}, kUInt8));
  EXPECT_TRUE(testutil::all_close("causal", old_causal, scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true),
                                  testutil::kFloat32Tol));
  EXPECT_TRUE(testutil::all_close("causal and mask", old_both,
                                  scaled_dot_product_attention(q, k, v, keep * lower, 0.0, false, 0.3),
                                  testutil::kFloat32Tol));
  EXPECT_TRUE(testutil::all_close("bias", old_bias, scaled_dot_product_attention(q, k, v, bias),
                                  testutil::kFloat32Tol));
  EXPECT_EQ(values(causal_attn_mask(keep, 3, 4)), std::vector<double>({1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0}));
  const Tensor narrowed = causal_attn_mask(zeros({2, 3}), 2, 3);
  EXPECT_EQ(values(narrowed), std::vector<double>({0, -INFINITY, -INFINITY, 0, 0, -INFINITY}));
  expect_error([&] { causal_attn_mask(zeros({2, 3}), 3, 3); },
               "[causal_attn_mask] attn_mask of shape [2, 3] does not broadcast with [L, S] = [3, 3]");
}

// Note [Scaled causal softmax]: without a mask the scaling and the causal mask happen inside one
// softmax op; it must agree with the composed ops, with fewer queries than keys and more.
TEST_F(TransformerOps, FusedScaledCausalSoftmaxMatchesComposedOps) {
  for (const auto& [queries, keys] : {std::pair<int64_t, int64_t>{5, 7}, {7, 5}, {4, 4}}) {
    SCOPED_TRACE(std::to_string(queries) + " queries, " + std::to_string(keys) + " keys");
    const Tensor q = randn({2, 3, queries, 4}).requires_grad_(), k = randn({2, 3, keys, 4}).requires_grad_();
    const Tensor v = randn({2, 3, keys, 6}).requires_grad_(), w = randn({2, 3, queries, 6});
    const Tensor lower = tril(ones({queries, keys}, kUInt8));
    for (const bool causal : {false, true}) {
      const Tensor fused = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal, 0.7);
      Tensor scores = matmul(q, k.transpose(-2, -1)) * 0.7;
      if (causal) scores = where(lower, scores, full({}, -INFINITY));
      const Tensor composed = matmul(softmax(scores, -1), v);
      EXPECT_TRUE(testutil::all_close("forward", fused, composed, testutil::kFloat32Tol));
      const std::vector<Tensor> a = autograd::grad({sum(fused * w)}, {q, k, v});
      const std::vector<Tensor> b = autograd::grad({sum(composed * w)}, {q, k, v});
      for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(testutil::all_close("grad " + std::to_string(i), a[i], b[i], testutil::kFloat32Tol));
    }
  }
}

TEST_F(TransformerOps, AttentionGradcheck) {
  const Tensor keep = from_vector({1, 0, 1, 1}, {4}).to(kUInt8);
  const Tensor bias = rand({3, 4}, kFloat64);
  EXPECT_GRADCHECK([](auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); },
                   {leaf({2, 3, 2}), leaf({2, 4, 2}), leaf({2, 4, 3})});
  EXPECT_GRADCHECK([](auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), 0.0, true); },
                   {leaf({2, 1, 3, 2}), leaf({2, 1, 3, 2}), leaf({2, 1, 3, 2})});
  EXPECT_GRADCHECK([](auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), 0.0, true, 0.6); },
                   {leaf({2, 4, 2}), leaf({2, 3, 2}), leaf({2, 3, 3})});
  EXPECT_GRADCHECK([&](auto& v) {
    return scaled_dot_product_attention(v[0], v[1], v[2], causal_attn_mask(keep, 3, 4), 0.0, false, 0.7);
  }, {leaf({3, 2}), leaf({4, 2}), leaf({4, 3})});
  EXPECT_GRADCHECK([&](auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2], bias); },
                   {leaf({3, 2}), leaf({4, 2}), leaf({4, 3})});
  // a row that may attend to nothing passes no gradient
  const Tensor empty_row = from_vector({1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0}, {3, 4}).to(kUInt8);
  EXPECT_GRADCHECK([&](auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2], empty_row); },
                   {leaf({3, 2}), leaf({4, 2}), leaf({4, 3})});
}

TEST_F(TransformerOps, AttentionSavesQKVTheWeightsAndTheMask) {
  // See Note [What attention saves]: q, k, v, the weights [..., L, S], the uint8 mask and, with
  // dropout, its keep mask and the dropped weights.
  const int64_t B = 2, H = 3, L = 5, S = 7, E = 4, Ev = 6;
  const Tensor q = randn({B, H, L, E}).requires_grad_(), k = randn({B, H, S, E}).requires_grad_();
  const Tensor v = randn({B, H, S, Ev}).requires_grad_();
  const Tensor keep = ones({S}, kUInt8);
  SavedTensors saved;
  Tensor out;
  {
    autograd::SavedTensorHooksGuard guard(saved.hooks());
    out = scaled_dot_product_attention(q, k, v, causal_attn_mask(keep, L, S));
  }
  const int64_t f = 4;  // bytes of a float32
  const int64_t mask = L * S;  // the causal mask combined with keep: uint8 [L, S]
  EXPECT_EQ(saved.distinct_bytes(), f * (B * H * (L * E + S * E + S * Ev + L * S)) + mask);
  // Without a mask nothing uint8 is saved.
  SavedTensors plain;
  {
    autograd::SavedTensorHooksGuard guard(plain.hooks());
    out = scaled_dot_product_attention(q, k, v);
  }
  EXPECT_EQ(plain.distinct_bytes(), f * (B * H * (L * E + S * E + S * Ev + L * S)));
  SavedTensors dropped;
  {
    autograd::SavedTensorHooksGuard guard(dropped.hooks());
    out = scaled_dot_product_attention(q, k, v, Tensor(), 0.3, true);
  }
  EXPECT_EQ(dropped.distinct_bytes(), f * (B * H * (L * E + S * E + S * Ev + 2 * L * S)) + B * H * L * S);
  sum(out).backward();
  EXPECT_EQ(v.grad().shape(), v.shape());
}

TEST_F(TransformerOps, AttentionErrors) {
  const Tensor q = zeros({2, 5, 4}), k = zeros({2, 6, 4}), v = zeros({2, 6, 3});
  expect_error([&] { scaled_dot_product_attention(q, zeros({2, 6, 8}), v); },
               "[scaled_dot_product_attention] key's head dim 8 differs from query's 4: query [2, 5, 4], key [2, 6, 8]");
  expect_error([&] { scaled_dot_product_attention(q, k, zeros({2, 5, 3})); },
               "[scaled_dot_product_attention] value has 5 positions but key has 6");
  expect_error([&] { scaled_dot_product_attention(q, zeros({3, 6, 4}), v); },
               "[scaled_dot_product_attention] query and key must have the same leading dims, got query [2, 5, 4], "
               "key [3, 6, 4]");
  expect_error([&] { scaled_dot_product_attention(q, k, zeros({3, 6, 3})); },
               "[scaled_dot_product_attention] expects value [..., S, Ev] with query's and key's leading dims, got "
               "query [2, 5, 4], key [2, 6, 4], value [3, 6, 3]");
  expect_error([&] { scaled_dot_product_attention(zeros({4}), k, v); },
               "[scaled_dot_product_attention] expects query [..., L, E] and key [..., S, E] with the same number "
               "of dims (at least 2), got query [4], key [2, 6, 4]");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({5, 5}, kUInt8)); },
               "[scaled_dot_product_attention] attn_mask of shape [5, 5] does not broadcast to the scores' shape");
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({5, 6}, kUInt8), 0.0, true); },
               "[scaled_dot_product_attention] takes attn_mask or is_causal, not both (as PyTorch)");
  expect_error([&] { scaled_dot_product_attention(q, k, v, Tensor(), 1.5); },
               "[scaled_dot_product_attention] dropout_p has to be between 0 and 1, but got 1.5");
  expect_error([&] { attention_weights(q, zeros({2, 6, 5})); },
               "[scaled_dot_product_attention] key's head dim 5 differs from query's 4");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({3, 5, 6}, kUInt8)); },
               "[scaled_dot_product_attention] attn_mask of shape [3, 5, 6] does not broadcast to the scores' shape "
               "[2, 5, 6]");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({6}, kInt64)); },
               "[scaled_dot_product_attention] attn_mask must be uint8 or float32 like the query, got int64");
  expect_error([&] { scaled_dot_product_attention(q, k, v.to(kFloat64)); },
               "[scaled_dot_product_attention] query, key and value must have one dtype");
}

void check_attention_parity(const std::string& file) {
  Fixture f = Fixture::load(file);
  struct Variant {
    std::string name;
    bool causal;
    Tensor mask;
    std::optional<double> scale;
  };
  const Tensor bias = f.get("bias");  // the file's "bias" case is causal too: one mask for both
  const std::vector<Variant> variants = {{"causal", true, Tensor(), std::nullopt},
                                         {"keep", false, fixture_mask(f, "keep"), 0.3},
                                         {"bias", false, causal_attn_mask(bias, bias.size(-2), bias.size(-1)),
                                          std::nullopt}};
  for (const Variant& variant : variants) {
    SCOPED_TRACE(variant.name);
    Tensor q = fixture_leaf(f, "q"), k = fixture_leaf(f, "k"), v = fixture_leaf(f, "v");
    Tensor out = scaled_dot_product_attention(q, k, v, variant.mask, 0.0, variant.causal, variant.scale);
    sum(out * f.get("w_" + variant.name)).backward();
    EXPECT_MATCHES(f, "out_" + variant.name, out);
    EXPECT_MATCHES(f, "grad_" + variant.name + "_q", q.grad());
    EXPECT_MATCHES(f, "grad_" + variant.name + "_k", k.grad());
    EXPECT_MATCHES(f, "grad_" + variant.name + "_v", v.grad());
  }
}
TEST_F(TransformerOps, AttentionParity) { check_attention_parity("parity_attention.txt"); }
TEST_F(TransformerOps, AttentionParityFloat64) { check_attention_parity("parity_attention_f64.txt"); }
