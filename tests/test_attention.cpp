// Attention as PyTorch has it: scaled_dot_product_attention with its masks, is_causal, scale,
// dropout and rows that attend to nothing; nn::MultiheadAttention over its options; the
// TransformerEncoderLayer in both norm orders and a 2-layer BERT-shaped TransformerEncoder. The
// golden files are written by tests/fixtures/make_attention_fixtures.py (PyTorch 2.15; see that
// script for what each file holds): forward values and the gradients of the inputs and of every
// parameter, after loading PyTorch's state dict unchanged. The op itself also against the composed
// ops, with dropout, through its deprecated argument order, what it saves for the backward, its
// errors, and parity_attention*.txt of tests/fixtures/make_fixtures.py; the op table
// (tests/op_table.cpp, Note [The op table]) adds the checks every op gets: gradcheck in float64
// (causal, masks, scale, a query that attends to nothing), the float32 and 16-bit columns and
// integer inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/autograd/engine.h"
#include "core/autograd/saved_tensor.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"
#include "utils/checkpoint.h"
#include "utils/checkpoint_sequential.h"

using namespace ember;
using testutil::expect_error;
using testutil::Fixture;
using testutil::fixture_leaf;
using testutil::fixture_mask;
using testutil::SavedTensors;
using testutil::values;

namespace {

#define EXPECT_MATCHES(f, name, got) EXPECT_TRUE(testutil::all_close(name, got, (f).get(name), testutil::kFloat32Tol))

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A mask from the file: torch.bool masks are stored as int64 0/1 and become uint8 (ember's bool);
// float masks stay as they are; absent ones are undefined.
Tensor mask_of(const Fixture& f, const std::string& name) {
  for (const std::string& n : f.names())
    if (n == name) return f.get(name).dtype() == kInt64 ? f.get(name).to(kUInt8) : f.get(name);
  return Tensor();
}

nn::StateDict state_of(const Fixture& f) {
  nn::StateDict out;
  for (const std::string& name : f.names())
    if (starts_with(name, "state.")) out[name.substr(6)] = f.get(name);
  return out;
}

// Every parameter's gradient against grad.<name>, and no parameter gradient in the file the module
// lacks (`inputs` are the input gradients' names).
void expect_param_grads(const Fixture& f, nn::Module& m, const std::vector<std::string>& inputs) {
  size_t expected = inputs.size();
  for (const auto& [name, p] : m.named_parameters()) {
    EXPECT_MATCHES(f, "grad." + name, p.grad());
    ++expected;
  }
  size_t in_file = 0;
  for (const std::string& name : f.names()) in_file += starts_with(name, "grad.") ? 1 : 0;
  EXPECT_EQ(in_file, expected) << f.path() << " has gradients of parameters the module lacks";
}

std::vector<int64_t> config_of(const Fixture& f) { return f.get("config").to_vector<int64_t>(); }

using AttentionOps = testutil::SeededTest<7>;

}  // namespace

// --- scaled_dot_product_attention against PyTorch 2.15 ---

TEST(Attention, ScaledDotProductAttentionMatchesPyTorch) {
  const Fixture f = Fixture::load("attention_sdpa.txt");
  struct Variant {
    std::string name;
    bool is_causal;
    std::optional<double> scale;
    std::string query = "q";
  };
  const std::vector<Variant> variants = {{"plain", false, std::nullopt},
                                         {"causal", true, std::nullopt},
                                         {"causal_long", true, 0.5, "q_long"},
                                         {"bool", false, 0.4},
                                         {"float", false, std::nullopt},
                                         {"bool_empty_rows", false, std::nullopt},
                                         {"float_empty_rows", false, 1.3}};
  for (const Variant& c : variants) {
    SCOPED_TRACE(c.name);
    Tensor q = f.get(c.query).requires_grad_(), k = f.get("k").requires_grad_(), v = f.get("v").requires_grad_();
    const Tensor out = scaled_dot_product_attention(q, k, v, mask_of(f, "mask_" + c.name), 0.0, c.is_causal, c.scale);
    EXPECT_MATCHES(f, "out_" + c.name, out);
    sum(out * f.get("w_" + c.name)).backward();
    EXPECT_MATCHES(f, "grad_" + c.name + "_q", q.grad());
    EXPECT_MATCHES(f, "grad_" + c.name + "_k", k.grad());
    EXPECT_MATCHES(f, "grad_" + c.name + "_v", v.grad());
  }
}

// Checkpointing restores the generators before its recompute (Note [Non-reentrant checkpointing]):
// the recompute draws the same dropout
// of the attention weights, so the gradients are the plain ones, bit for bit.
TEST(Attention, DropoutUnderCheckpointGivesThePlainGradients) {
  manual_seed(3);
  const Tensor q0 = randn({2, 2, 5, 4}), k0 = randn({2, 2, 6, 4}), v = randn({2, 2, 6, 3});
  const Tensor w = randn({2, 2, 5, 3});
  std::vector<std::vector<Tensor>> grads;  // of q and k: plain, checkpointed, without dropout
  for (const int run : {0, 1, 2}) {
    const Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_();
    const double p = run == 2 ? 0.0 : 0.3;
    auto attend = [&](const Tensor& x) { return scaled_dot_product_attention(x, k, v, Tensor(), p); };
    manual_seed(11);
    const Tensor out = run == 1 ? utils::checkpoint(attend, q) : attend(q);
    sum(out * w).backward();
    grads.push_back({q.grad(), k.grad()});
  }
  EXPECT_TRUE(testutil::bitwise_equal(grads[0][0], grads[1][0]));
  EXPECT_TRUE(testutil::bitwise_equal(grads[0][1], grads[1][1]));
  EXPECT_FALSE(testutil::bitwise_equal(grads[0][0], grads[2][0]));  // the dropout did drop something
}

// --- scaled_dot_product_attention: the composed ops, dropout, what it saves, errors ---

TEST_F(AttentionOps, AttentionIsSoftmaxOfScaledScoresTimesValues) {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  const Tensor plain = matmul(softmax(matmul(q, k.transpose(1, 2)) * 0.5, -1), v);
  EXPECT_TRUE(
      testutil::all_close("default scale", scaled_dot_product_attention(q, k, v), plain, testutil::kFloat32Tol));
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
TEST_F(AttentionOps, AttentionDropoutDropsTheWeights) {
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
TEST_F(AttentionOps, DeprecatedAttentionOrderForwards) {
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
TEST_F(AttentionOps, FusedScaledCausalSoftmaxMatchesComposedOps) {
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
      for (size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(testutil::all_close("grad " + std::to_string(i), a[i], b[i], testutil::kFloat32Tol));
    }
  }
}

// Note [Softmax over the scores]: the weights are written over the scores, so the forward's
// peak holds one [..., L, S] buffer, causal or not.
TEST_F(AttentionOps, TheWeightsAreWrittenOverTheScores) {
  const int64_t B = 2, H = 3, L = 64, S = 64, E = 8;
  const Tensor q = randn({B, H, L, E}), k = randn({B, H, S, E});
  const int64_t scores_bytes = 4 * B * H * L * S;
  for (const bool causal : {false, true}) {
    memory::reset_peak();
    const int64_t base = memory::stats().live_bytes;
    const Tensor w = attention_weights(q, k, Tensor(), causal, 0.5);
    EXPECT_EQ(memory::stats().peak_bytes - base, scores_bytes) << "causal " << causal;
    EXPECT_EQ(memory::stats().live_bytes - base, scores_bytes);
  }
  // A policy that keeps q @ k^T holds the scores, for the recompute to replay: they must keep
  // their values, and the gradients are the plain ones.
  const Tensor g = randn({B, H, L, S});
  auto gradient = [&](bool checkpointed) {
    const Tensor qg = q.detach().requires_grad_();
    auto fn = [&](const Tensor& x) { return attention_weights(x, k, Tensor(), true, 0.5); };
    utils::CheckpointOptions options;
    options.policy = utils::save_matmuls();
    sum((checkpointed ? utils::checkpoint(fn, qg, options) : fn(qg)) * g).backward();
    return values(qg.grad());
  };
  utils::checkpoint_stats() = {};
  EXPECT_EQ(gradient(true), gradient(false));
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 1);
}

// Note [Float16 attention scores]: scores past float16's 65504 (here about 4 * 4 * 64 = 1024 *
// 64 before the 1/8 scale) stay finite, as PyTorch's float32-accumulating CPU attention gives;
// stored in float16 they were inf and the weights NaN.
TEST_F(AttentionOps, Float16ScoresPastItsRangeKeepTheirAnswer) {
  auto all_finite = [](const Tensor& t) {
    const std::vector<double> v = values(t.to(kFloat64));
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  const int64_t L = 5, S = 7, E = 64;
  const Tensor q = full({1, 2, L, E}, 40.0) + randn({1, 2, L, E}), k = full({1, 2, S, E}, 40.0) + randn({1, 2, S, E});
  const Tensor v = randn({1, 2, S, E});
  for (const bool causal : {false, true}) {
    const Tensor q16 = q.to(kFloat16).requires_grad_(), k16 = k.to(kFloat16).requires_grad_();
    const Tensor v16 = v.to(kFloat16).requires_grad_();
    const Tensor out = scaled_dot_product_attention(q16, k16, v16, Tensor(), 0.0, causal);
    EXPECT_EQ(out.dtype(), kFloat16);
    const Tensor reference = scaled_dot_product_attention(q16.detach().to(kFloat32), k16.detach().to(kFloat32),
                                                          v16.detach().to(kFloat32), Tensor(), 0.0, causal);
    EXPECT_TRUE(all_finite(out));
    EXPECT_LT(max(abs(out.to(kFloat32) - reference)).item(), 0.02) << "causal " << causal;
    sum(out.to(kFloat32)).backward();
    EXPECT_TRUE(all_finite(q16.grad()));
    EXPECT_TRUE(all_finite(v16.grad()));
  }
  const Tensor mask = full({L, S}, -1.0, kFloat16);  // a float16 mask is added in float32 too
  EXPECT_TRUE(all_finite(scaled_dot_product_attention(q.to(kFloat16), k.to(kFloat16), v.to(kFloat16), mask)));
}

TEST_F(AttentionOps, AttentionSavesQKVTheWeightsAndTheMask) {
  // See Note [What attention saves]: on the math path, q, k, v, the weights [..., L, S], the uint8
  // mask and, with dropout, its keep mask and the dropped weights. (The fused path's saves are in
  // test_fused_attention.cpp.)
  AttentionBackendGuard math(AttentionBackend::Math);
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

TEST_F(AttentionOps, AttentionErrors) {
  const Tensor q = zeros({2, 5, 4}), k = zeros({2, 6, 4}), v = zeros({2, 6, 3});
  expect_error([&] { scaled_dot_product_attention(q, zeros({2, 6, 8}), v); },
               "[scaled_dot_product_attention] key's head dim 8 differs from query's 4: query [2, 5, 4], key "
               "[2, 6, 8]");
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
    EXPECT_MATCHES_FIXTURE(f, "out_" + variant.name, out);
    EXPECT_MATCHES_FIXTURE(f, "grad_" + variant.name + "_q", q.grad());
    EXPECT_MATCHES_FIXTURE(f, "grad_" + variant.name + "_k", k.grad());
    EXPECT_MATCHES_FIXTURE(f, "grad_" + variant.name + "_v", v.grad());
  }
}
TEST_F(AttentionOps, AttentionParity) { check_attention_parity("parity_attention.txt"); }
TEST_F(AttentionOps, AttentionParityFloat64) { check_attention_parity("parity_attention_f64.txt"); }

// --- nn::MultiheadAttention ---

namespace {

void check_mha(const std::string& file) {
  SCOPED_TRACE(file);
  const Fixture f = Fixture::load(file);
  const std::vector<int64_t> c = config_of(f);  // see make_attention_fixtures.py
  const int64_t embed_dim = c[0], heads = c[1], kdim = c[2], vdim = c[3];
  const bool bias = c[4], batch_first = c[5], need_weights = c[6], average = c[7], is_causal = c[8], self = c[9];
  nn::MultiheadAttention mha(embed_dim, heads, 0.0, bias, kdim, vdim, batch_first);
  mha.load_state_dict(state_of(f));
  const Tensor query = f.get("query").requires_grad_();
  const Tensor key = self ? query : f.get("key").requires_grad_();
  const Tensor value = self ? query : f.get("value").requires_grad_();
  const auto [out, weights] = mha.forward(query, key, value, mask_of(f, "key_padding_mask"), need_weights,
                                          mask_of(f, "attn_mask"), average, is_causal);
  EXPECT_MATCHES(f, "out", out);
  Tensor loss = sum(out * f.get("w"));
  EXPECT_EQ(weights.defined(), need_weights);
  if (need_weights) {
    EXPECT_MATCHES(f, "weights", weights);
    loss = loss + sum(weights * f.get("w_weights"));
  }
  loss.backward();
  EXPECT_MATCHES(f, "grad.query", query.grad());
  if (!self) {
    EXPECT_MATCHES(f, "grad.key", key.grad());
    EXPECT_MATCHES(f, "grad.value", value.grad());
  }
  expect_param_grads(f, mha, self ? std::vector<std::string>{"query"}
                                  : std::vector<std::string>{"query", "key", "value"});
}

}  // namespace

TEST(Attention, MultiheadAttentionMatchesPyTorch) {
  for (const char* c : {"self", "cross_kdim_vdim", "kdim_only", "bool_masks", "float_masks", "mixed_masks",
                        "bool_3d_mask", "causal", "causal_padded", "unbatched", "empty_rows"})
    check_mha(std::string("attention_mha_") + c + ".txt");
}

TEST(Attention, MultiheadAttentionParametersAreTorchs) {
  manual_seed(1);
  nn::MultiheadAttention same(8, 2);
  std::vector<std::string> names;
  for (const auto& [name, t] : same.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(same.in_proj_weight.shape(), Shape({24, 8}));
  // xavier_uniform_ over the whole [3E, E] matrix: bound sqrt(6 / (E + 3E))
  const double bound = std::sqrt(6.0 / 32.0);
  const double largest = max(abs(same.in_proj_weight)).item();
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.8 * bound);
  EXPECT_EQ(values(same.in_proj_bias), std::vector<double>(24, 0.0));
  EXPECT_EQ(values(same.out_proj.bias), std::vector<double>(8, 0.0));

  nn::MultiheadAttention cross(8, 2, 0.0, false, 6, 3, true);
  names.clear();
  for (const auto& [name, t] : cross.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "out_proj.weight"}));
  EXPECT_EQ(cross.k_proj_weight.shape(), Shape({8, 6}));
  EXPECT_EQ(cross.v_proj_weight.shape(), Shape({8, 3}));
  EXPECT_FALSE(cross.in_proj_weight.defined());
}

TEST(Attention, MultiheadAttentionDropsWeightsOnlyInTraining) {
  manual_seed(2);
  nn::MultiheadAttention mha(8, 2, 0.5);
  const Tensor x = randn({4, 3, 8});
  mha.eval();
  const auto [eval_out, eval_weights] = mha.forward(x, x, x);
  // eval: the weights of each query sum to 1 (averaged over heads too)
  testutil::expect_near(sum(eval_weights, {2}), std::vector<double>(12, 1.0));
  mha.train();
  const auto [train_out, train_weights] = mha.forward(x, x, x);
  EXPECT_FALSE(testutil::all_close("train", train_out, eval_out, testutil::kFloat32Tol));
  EXPECT_GT(values(sum(train_weights == 0.0)).front(), 0.0);
  // the one-tensor forward is self-attention without weights
  mha.eval();
  EXPECT_TRUE(testutil::bitwise_equal(mha(x), mha.forward(x, x, x, Tensor(), false).first));
}

TEST(Attention, MultiheadAttentionErrors) {
  nn::MultiheadAttention mha(8, 2);
  const Tensor q = zeros({4, 3, 8}), kv = zeros({5, 3, 8});
  expect_error([] { nn::MultiheadAttention(10, 3); },
               "[MultiheadAttention] embed_dim 10 must be divisible by num_heads 3");
  expect_error([] { nn::MultiheadAttention(8, 2, 0.0, true, 0, 8); }, "[MultiheadAttention] kdim must be positive, got 0");
  expect_error([] { nn::MultiheadAttention(8, 2, 0.0, true, 5); },
               "[MultiheadAttention] kdim and vdim go together: got kdim 5 without vdim (pass the other as embed_dim 8");
  expect_error([] { nn::MultiheadAttention(8, 2, 0.0, true, std::nullopt, 5); },
               "[MultiheadAttention] kdim and vdim go together: got vdim 5 without kdim");
  expect_error([] { nn::MultiheadAttention(8, 2, -0.1); },
               "[MultiheadAttention] dropout has to be between 0 and 1, but got -0.1");
  expect_error([&] { mha.forward(zeros({3, 8}), kv, kv); },
               "[MultiheadAttention] expects query, key and value of 3 dims ([L, N, E], [N, L, E] with batch_first) "
               "or 2 (unbatched [L, E]), got query [3, 8], key [5, 3, 8], value [5, 3, 8]");
  expect_error([&] { mha.forward(q, zeros({5, 3, 6}), kv); },
               "[MultiheadAttention] expects query, key and value with 8, 8 and 8 features (embed_dim, kdim, vdim), "
               "got query [4, 3, 8], key [5, 3, 6], value [5, 3, 8]");
  expect_error([&] { mha.forward(q, kv, zeros({4, 3, 8})); },
               "[MultiheadAttention] query, key and value must have one batch size and key and value one length, "
               "got query [4, 3, 8], key [5, 3, 8], value [4, 3, 8]");
  expect_error([&] { mha.forward(q, kv, kv, zeros({5, 3}, kUInt8)); },
               "[MultiheadAttention] key_padding_mask must be [N, S] = [3, 5], got [5, 3]");
  expect_error([&] { mha.forward(q, kv, kv, zeros({3, 5}, kInt64)); },
               "[MultiheadAttention] key_padding_mask must be uint8 (ember's bool: nonzero = may not attend) or "
               "float32 like the query, got int64");
  expect_error([&] { mha.forward(q, kv, kv, Tensor(), true, zeros({4, 4}, kUInt8)); },
               "[MultiheadAttention] attn_mask must be [L, S] = [4, 5] or [N * num_heads, L, S] = [6, 4, 5], got "
               "[4, 4]");
  expect_error([&] { mha.forward(q, kv, kv, Tensor(), true, zeros({4, 5}, kFloat64)); },
               "[MultiheadAttention] attn_mask must be uint8 (ember's bool: nonzero = may not attend) or float32");
  expect_error([&] { mha.forward(zeros({4, 8}), zeros({5, 8}), zeros({5, 8}), Tensor(), true, zeros({6, 4, 5})); },
               "[MultiheadAttention] attn_mask must be [L, S] = [4, 5] or [num_heads, L, S] = [2, 4, 5], got "
               "[6, 4, 5]");
  expect_error([&] { mha.forward(q, kv, kv, Tensor(), true, Tensor(), true, true); },
               "[MultiheadAttention] is_causal is a hint that attn_mask is the causal mask, as in PyTorch");
}

// --- TransformerEncoderLayer and TransformerEncoder ---

namespace {

nn::TransformerEncoderLayerOptions layer_options(const Fixture& f) {
  const std::vector<int64_t> c = config_of(f);  // see make_attention_fixtures.py
  return {.d_model = c[0], .nhead = c[1], .dim_feedforward = c[2], .dropout = 0.0,
          .activation = c[3] ? nn::FeedForwardActivation::GELU : nn::FeedForwardActivation::ReLU,
          .layer_norm_eps = f.get("eps").item(), .batch_first = c[4] != 0, .norm_first = c[5] != 0,
          .bias = c[6] != 0};
}

// Loads the file's state into m, runs forward (m's own, with the file's masks) and checks the
// output and every gradient.
template <class M>
void check_encoder(const Fixture& f, M& m) {
  m.load_state_dict(state_of(f));
  m.train();
  const Tensor src = f.get("src").requires_grad_();
  const Tensor out = m.forward(src, mask_of(f, "src_mask"), mask_of(f, "src_key_padding_mask"), config_of(f)[7] != 0);
  EXPECT_MATCHES(f, "out", out);
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES(f, "grad.src", src.grad());
  expect_param_grads(f, m, {"src"});
}

}  // namespace

TEST(Attention, TransformerEncoderLayerMatchesPyTorch) {
  for (const char* c : {"post_norm", "pre_norm", "causal_no_bias"}) {
    SCOPED_TRACE(c);
    const Fixture f = Fixture::load(std::string("attention_encoder_") + c + ".txt");
    nn::TransformerEncoderLayer layer(layer_options(f));
    check_encoder(f, layer);
  }
}

TEST(Attention, BertShapedEncoderMatchesPyTorch) {
  const Fixture f = Fixture::load("attention_encoder_bert.txt");
  nn::TransformerEncoder encoder(layer_options(f), config_of(f)[8]);
  check_encoder(f, encoder);
}

TEST(Attention, TransformerEncoderBuildsLikeTorch) {
  const nn::TransformerEncoderLayerOptions o{.d_model = 8, .nhead = 2, .dim_feedforward = 16, .norm_first = true};
  nn::TransformerEncoder encoder(o, 2, /*final_norm=*/true);
  const nn::StateDict state = encoder.state_dict();
  for (const char* key : {"layers.0.self_attn.in_proj_weight", "layers.1.linear2.bias", "layers.1.norm2.weight",
                          "norm.weight", "norm.bias"})
    EXPECT_EQ(state.count(key), 1u) << key;
  // as torch's deep copies of one layer, both layers start the same
  EXPECT_TRUE(testutil::bitwise_equal(state.at("layers.0.linear1.weight"), state.at("layers.1.linear1.weight")));
  encoder.eval();
  const Tensor x = randn({5, 3, 8});
  EXPECT_TRUE(testutil::bitwise_equal(encoder(x), encoder.forward(x, Tensor())));
  EXPECT_EQ(encoder(x).shape(), x.shape());
  nn::TransformerEncoderLayer no_bias(8, 2, 16, 0.1, nn::FeedForwardActivation::ReLU, 1e-5, false, false, false);
  EXPECT_EQ(no_bias.state_dict().count("norm1.bias"), 0u);
  EXPECT_EQ(no_bias.state_dict().count("self_attn.in_proj_bias"), 0u);
  expect_error([] { nn::TransformerEncoder(nn::TransformerEncoderLayerOptions{.d_model = 8, .nhead = 2}, 0); },
               "[TransformerEncoder] num_layers must be positive, got 0");
  expect_error([] { nn::TransformerEncoderLayer(8, 3); }, "[MultiheadAttention] embed_dim 8 must be divisible by "
               "num_heads 3");
}

// Note [Modules with several inputs]: the encoder calls each layer with its masks through the call
// path, so checkpoint_modules<TransformerEncoderLayer> checkpoints every layer with them: with
// dropout on and a key padding mask, bitwise the plain gradients; hooks see src and both masks.
TEST(Attention, CheckpointedEncoderLayersTakeTheirMasks) {
  const nn::TransformerEncoderLayerOptions o{.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.2,
                                             .batch_first = true};
  nn::TransformerEncoder plain(o, 3), checkpointed(o, 3);
  checkpointed.load_state_dict(plain.state_dict());
  utils::checkpoint_stats() = {};
  const Tensor x0 = randn({2, 5, 8});
  const Tensor padding = from_vector<uint8_t>({0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, {2, 5}, TensorOptions(kUInt8));
  std::vector<size_t> inputs_seen;
  checkpointed.layers[1].register_forward_pre_hook(
      [&](nn::Module&, const nn::Module::Tensors& in) -> std::optional<nn::Module::Tensors> {
        inputs_seen.push_back(in.size());
        return std::nullopt;
      });
  auto grads = [&](nn::TransformerEncoder& encoder) {
    const Tensor x = x0.detach().requires_grad_();
    manual_seed(7);
    sum(encoder(x, Tensor(), padding)).backward();
    std::vector<Tensor> g{x.grad()};
    for (const Tensor& p : encoder.parameters()) g.push_back(p.grad());
    return g;
  };
  const std::vector<Tensor> expected = grads(plain);
  EXPECT_EQ(utils::checkpoint_modules<nn::TransformerEncoderLayer>(checkpointed), 3);
  const std::vector<Tensor> got = grads(checkpointed);
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 3);
  EXPECT_EQ(inputs_seen, (std::vector<size_t>{3}));  // src, src_mask (undefined), src_key_padding_mask
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(testutil::bitwise_equal(got[i], expected[i])) << i;
}
