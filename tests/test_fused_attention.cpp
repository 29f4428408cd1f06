// The fused attention path (Note [Fused attention] in core/ops/fused_attention.cpp) against the
// math path, which stays the reference: float64 forward and gradients over a grid of shapes,
// masks, causal and dropout; gradcheck; 16-bit against float32; the same bits for any thread
// count and under checkpointing; what it saves and its peak, linear in L; the backend choice and
// its errors. PyTorch's own values are in test_attention.cpp (its fixtures run on whichever path
// the default backend picks) and in the op table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/attention_backend.h"
#include "core/autograd/engine.h"
#include "core/autograd/node.h"
#include "core/autograd/saved_tensor.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/attention.h"
#include "test_helpers.h"
#include "utils/checkpoint.h"

using namespace ember;
using testutil::expect_error;

namespace {

using FusedAttention = testutil::SeededTest<11>;

// What one attention call gives: its output and the gradients of q, k and v for a fixed output
// gradient.
struct Result {
  Tensor out, dq, dk, dv;
};

struct Case {
  Case(Shape q, Shape k, Shape v, Tensor mask = Tensor(), bool causal = false, double dropout_p = 0.0)
      : q(std::move(q)), k(std::move(k)), v(std::move(v)), mask(std::move(mask)), causal(causal),
        dropout_p(dropout_p) {}
  Shape q, k, v;  // [..., L, E], [..., S, E], [..., S, Ev]
  Tensor mask;
  bool causal;
  double dropout_p;
  std::optional<double> scale;
};

Result run(AttentionBackend backend, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Case& c,
           uint64_t seed = 5) {
  AttentionBackendGuard use(backend);
  const Tensor lq = q.detach().requires_grad_(), lk = k.detach().requires_grad_(), lv = v.detach().requires_grad_();
  manual_seed(seed);
  Tensor out = scaled_dot_product_attention(lq, lk, lv, c.mask, c.dropout_p, c.causal, c.scale);
  autograd::backward({out}, {g});
  return {out.detach(), lq.grad(), lk.grad(), lv.grad()};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return max(abs(a.to(kFloat64) - b.to(kFloat64))).item<double>();
}

void expect_close(const Result& got, const Result& want, double tol, const std::string& what) {
  EXPECT_LE(max_abs_diff(got.out, want.out), tol) << what << ": output";
  EXPECT_LE(max_abs_diff(got.dq, want.dq), tol) << what << ": dq";
  EXPECT_LE(max_abs_diff(got.dk, want.dk), tol) << what << ": dk";
  EXPECT_LE(max_abs_diff(got.dv, want.dv), tol) << what << ": dv";
}

// Fused against math for one case, in `dtype`, from the same random inputs.
void compare_with_math(const Case& c, DType dtype, double tol, const std::string& what) {
  const Tensor q = randn(c.q, kFloat64).to(dtype), k = randn(c.k, kFloat64).to(dtype);
  const Tensor v = randn(c.v, kFloat64).to(dtype);
  Shape out_shape = c.q;
  out_shape.back() = c.v.back();
  const Tensor g = randn(out_shape, kFloat64).to(dtype);
  expect_close(run(AttentionBackend::Fused, q, k, v, g, c), run(AttentionBackend::Math, q, k, v, g, c), tol, what);
}

// The shapes of the grid: L != S, lengths on both sides of the kernels' tiles (64 query rows, 256
// keys), one row, one key, head dims 8 to 128 and a value dim of its own.
struct Lengths {
  int64_t L, S, E, Ev;
};
const std::vector<Lengths> kGrid = {{1, 1, 8, 8},     {1, 300, 16, 16},  {70, 1, 8, 12},   {65, 257, 32, 32},
                                    {130, 70, 64, 64}, {64, 256, 128, 128}, {200, 520, 24, 40}, {3, 5, 8, 4}};

std::string name_of(const Lengths& n) {
  return "L " + std::to_string(n.L) + ", S " + std::to_string(n.S) + ", E " + std::to_string(n.E) + ", Ev " +
         std::to_string(n.Ev);
}

TEST_F(FusedAttention, MatchesTheMathPathInFloat64) {
  for (const Lengths& n : kGrid) {
    const Case plain{{2, 3, n.L, n.E}, {2, 3, n.S, n.E}, {2, 3, n.S, n.Ev}};
    compare_with_math(plain, kFloat64, 1e-12, name_of(n));
    Case causal = plain;
    causal.causal = true;
    compare_with_math(causal, kFloat64, 1e-12, name_of(n) + ", causal");
    Case scaled = plain;
    scaled.scale = 0.3;
    compare_with_math(scaled, kFloat64, 1e-12, name_of(n) + ", scale 0.3");
  }
}

TEST_F(FusedAttention, EveryMaskKindMatchesTheMathPath) {
  for (const Lengths& n : kGrid) {
    const Case base{{2, 3, n.L, n.E}, {2, 3, n.S, n.E}, {2, 3, n.S, n.Ev}};
    const std::vector<std::pair<std::string, Tensor>> masks = {
        {"bool [L, S]", rand({n.L, n.S}) > 0.3},
        {"bool [B, 1, L, S]", rand({2, 1, n.L, n.S}) > 0.5},
        {"bool key padding [B, 1, 1, S]", rand({2, 1, 1, n.S}) > 0.2},
        {"bool [B, H, L, S] with empty rows", rand({2, 3, n.L, n.S}) > 0.9},
        {"float [L, S]", randn({n.L, n.S}, kFloat64)},
        {"float [H, 1, S] with -inf", where(rand({3, 1, n.S}) > 0.2, zeros({3, 1, n.S}, kFloat64),
                                            full({3, 1, n.S}, -testutil::kInf, kFloat64))},
        {"float [B, H, L, S]", randn({2, 3, n.L, n.S}, kFloat64)},
    };
    for (const auto& [what, mask] : masks) {
      Case c = base;
      c.mask = mask;
      compare_with_math(c, kFloat64, 1e-12, name_of(n) + ", " + what);
    }
  }
}

TEST_F(FusedAttention, ARowThatSeesNoKeyGivesZerosAndNoGradient) {
  Tensor mask = ones({4, 6}, kUInt8);
  mask.narrow(0, 1, 2).fill_(0);  // queries 1 and 2 see nothing
  const Case c{{4, 8}, {6, 8}, {6, 8}, mask};
  const Tensor q = randn({4, 8}, kFloat64), k = randn({6, 8}, kFloat64), v = randn({6, 8}, kFloat64);
  const Result r = run(AttentionBackend::Fused, q, k, v, ones({4, 8}, kFloat64), c);
  for (int64_t i : {1, 2}) {
    EXPECT_EQ(max(abs(r.out.select(0, i))).item<double>(), 0.0);
    EXPECT_EQ(max(abs(r.dq.select(0, i))).item<double>(), 0.0);
  }
  EXPECT_GT(max(abs(r.out.select(0, 0))).item<double>(), 0.0);
  // With no key at all (S = 0) every row is such a row, as on the math path.
  const Case none{{3, 4}, {0, 4}, {0, 5}};
  const Result empty = run(AttentionBackend::Fused, randn({3, 4}, kFloat64), randn({0, 4}, kFloat64),
                           randn({0, 5}, kFloat64), ones({3, 5}, kFloat64), none);
  EXPECT_EQ(empty.out.shape(), Shape({3, 5}));
  EXPECT_EQ(max(abs(empty.out)).item<double>(), 0.0);
}

TEST_F(FusedAttention, Gradcheck) {
  AttentionBackendGuard use(AttentionBackend::Fused);
  const Tensor mask = rand({1, 5, 7}) > 0.3;
  const Tensor additive = randn({5, 7}, kFloat64);
  for (int variant = 0; variant < 4; ++variant) {
    auto fn = [&](const std::vector<Tensor>& in) {
      if (variant == 1) return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.0, true);
      if (variant == 2) return scaled_dot_product_attention(in[0], in[1], in[2], mask);
      if (variant == 3) return scaled_dot_product_attention(in[0], in[1], in[2], additive, 0.0, false, 0.7);
      return scaled_dot_product_attention(in[0], in[1], in[2]);
    };
    EXPECT_GRADCHECK(fn, {testutil::leaf({2, 5, 4}), testutil::leaf({2, 7, 4}), testutil::leaf({2, 7, 3})});
  }
}

TEST_F(FusedAttention, DropoutDropsWhatTheMathPathDrops) {
  // Note [Dropout regenerated per tile]: in float64 both paths keep element (b, i, j) on the same
  // uniform, so they agree to rounding, forward and backward, and draw the same numbers.
  for (const Lengths& n : {Lengths{65, 257, 16, 16}, Lengths{5, 3, 8, 8}}) {
    Case c{{2, 2, n.L, n.E}, {2, 2, n.S, n.E}, {2, 2, n.S, n.Ev}};
    c.dropout_p = 0.3;
    compare_with_math(c, kFloat64, 1e-12, name_of(n) + ", dropout 0.3");
    c.causal = true;
    compare_with_math(c, kFloat64, 1e-12, name_of(n) + ", dropout 0.3, causal");
  }
  const Tensor q = randn({1, 9, 8}, kFloat64), k = randn({1, 9, 8}, kFloat64), v = randn({1, 9, 8}, kFloat64);
  AttentionBackendGuard use(AttentionBackend::Fused);
  manual_seed(3);
  (void)scaled_dot_product_attention(q, k, v, Tensor(), 0.5);
  const Tensor after_fused = rand({4}, kFloat64);
  AttentionBackendGuard math(AttentionBackend::Math);
  manual_seed(3);
  (void)scaled_dot_product_attention(q, k, v, Tensor(), 0.5);
  EXPECT_TRUE(testutil::bitwise_equal(after_fused, rand({4}, kFloat64))) << "the paths draw different amounts";
}

TEST_F(FusedAttention, DropoutReplaysBitwiseAndUnderCheckpoint) {
  const Tensor q = randn({2, 4, 100, 32}), k = randn({2, 4, 300, 32}), v = randn({2, 4, 300, 32});
  const Tensor g = randn({2, 4, 100, 32});
  Case c{q.shape(), k.shape(), v.shape()};
  c.dropout_p = 0.2;
  c.causal = true;
  const Result once = run(AttentionBackend::Fused, q, k, v, g, c, 9);
  const Result again = run(AttentionBackend::Fused, q, k, v, g, c, 9);
  EXPECT_TRUE(testutil::bitwise_equal(once.out, again.out));
  EXPECT_TRUE(testutil::bitwise_equal(once.dq, again.dq));
  // Under utils::checkpoint the backward recomputes the forward from the replayed generator state.
  AttentionBackendGuard use(AttentionBackend::Fused);
  const Tensor lq = q.detach().requires_grad_(), lk = k.detach().requires_grad_(), lv = v.detach().requires_grad_();
  manual_seed(9);
  Tensor out = utils::checkpoint(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.2, true)};
      },
      {lq, lk, lv})[0];
  autograd::backward({out}, {g});
  EXPECT_TRUE(testutil::bitwise_equal(out.detach(), once.out));
  EXPECT_TRUE(testutil::bitwise_equal(lq.grad(), once.dq));
  EXPECT_TRUE(testutil::bitwise_equal(lk.grad(), once.dk));
  EXPECT_TRUE(testutil::bitwise_equal(lv.grad(), once.dv));
}

TEST_F(FusedAttention, SixteenBitWithinTheirStepOfFloat32) {
  const Case c{{2, 3, 70, 64}, {2, 3, 300, 64}, {2, 3, 300, 64}, Tensor(), true};
  const Tensor q = randn(c.q), k = randn(c.k), v = randn(c.v), g = randn({2, 3, 70, 64});
  const Result want = run(AttentionBackend::Fused, q, k, v, g, c);
  for (DType dtype : {kBFloat16, kFloat16}) {
    const Result got = run(AttentionBackend::Fused, q.to(dtype), k.to(dtype), v.to(dtype), g.to(dtype), c);
    EXPECT_EQ(got.out.dtype(), dtype);
    EXPECT_EQ(got.dq.dtype(), dtype);
    // Inputs rounded to the dtype's step (2^-8 for bfloat16, 2^-11 for float16) move results of
    // size ~1 by a few steps.
    expect_close(got, want, dtype == kBFloat16 ? 0.08 : 0.01, dtype_name(dtype));
  }
}

TEST_F(FusedAttention, SameBitsForAnyThreadCount) {
  const Tensor q = randn({2, 3, 130, 64}), k = randn({2, 3, 300, 64}), v = randn({2, 3, 300, 64});
  const Tensor g = randn({2, 3, 130, 64}), mask = rand({2, 1, 130, 300}) > 0.2;
  const Case c{q.shape(), k.shape(), v.shape(), mask, false, 0.1};
  const int threads = get_num_threads();
  set_num_threads(1);
  const Result one = run(AttentionBackend::Fused, q, k, v, g, c);
  set_num_threads(std::max(2, threads));
  const Result many = run(AttentionBackend::Fused, q, k, v, g, c);
  set_num_threads(threads);
  EXPECT_TRUE(testutil::bitwise_equal(one.out, many.out));
  EXPECT_TRUE(testutil::bitwise_equal(one.dq, many.dq));
  EXPECT_TRUE(testutil::bitwise_equal(one.dk, many.dk));
  EXPECT_TRUE(testutil::bitwise_equal(one.dv, many.dv));
}

// Bytes saved for backward and the forward + backward peak above what was live before, from
// ember's allocator, for causal self-attention at length L.
struct Footprint {
  int64_t saved, peak;
};
Footprint footprint(AttentionBackend backend, int64_t B, int64_t H, int64_t L, int64_t E) {
  AttentionBackendGuard use(backend);
  const Tensor q = randn({B, H, L, E}).requires_grad_(), k = randn({B, H, L, E}).requires_grad_(),
               v = randn({B, H, L, E}).requires_grad_(), g = randn({B, H, L, E});
  const int64_t before = memory::stats(kCPU).live_bytes;
  memory::reset_peak(kCPU);
  testutil::SavedTensors saved;
  Tensor out;
  {
    autograd::SavedTensorHooksGuard watch(saved.hooks());
    out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  }
  autograd::backward({out}, {g});
  return {saved.distinct_bytes(), memory::stats(kCPU).peak_bytes - before};
}

TEST_F(FusedAttention, SavedBytesAndPeakGrowLinearlyInL) {
  const int64_t B = 1, H = 2, E = 32;
  const Footprint at256 = footprint(AttentionBackend::Fused, B, H, 256, E);
  const Footprint at512 = footprint(AttentionBackend::Fused, B, H, 512, E);
  const Footprint at1024 = footprint(AttentionBackend::Fused, B, H, 1024, E);
  // Linear: doubling L doubles both (up to the output and gradients, which are linear too).
  EXPECT_EQ(at512.saved, 2 * at256.saved);
  EXPECT_EQ(at1024.saved, 2 * at512.saved);
  EXPECT_LE(at1024.peak, 2 * at512.peak + 4096);
  EXPECT_LE(at512.peak, 2 * at256.peak + 4096);
  // q, k, v, the output (4 [B, H, L, E] float32 tensors) and the float32 log-sum-exp [B H, L].
  EXPECT_EQ(at1024.saved, 4 * B * H * 1024 * E * 4 + B * H * 1024 * 4);
  // The math path saves q, k, v and the [L, S] weights: quadratic.
  const Footprint math = footprint(AttentionBackend::Math, B, H, 1024, E);
  EXPECT_EQ(math.saved, 3 * B * H * 1024 * E * 4 + B * H * 1024 * 1024 * 4);
}

TEST_F(FusedAttention, PeakAtContext2048StaysBelowOneScoresTensor) {
  const int64_t B = 1, H = 4, L = 2048, E = 64;
  const Footprint fused = footprint(AttentionBackend::Fused, B, H, L, E);
  EXPECT_LT(fused.peak, B * H * L * L * 4) << "the peak of forward and backward holds a [B, H, L, S] float32 tensor";
}

TEST_F(FusedAttention, OneOpForCheckpointPolicies) {
  AttentionBackendGuard use(AttentionBackend::Fused);
  std::vector<std::string> names;
  utils::CheckpointOptions options;
  options.policy = [&names](const utils::OpInfo& op) {
    names.push_back(op.name);
    if (op.name == "fused_attention") {
      EXPECT_EQ(op.flops, 2 * 2 * 64 * 128 * (32 + 16));  // its products: more than its bytes times 6
    }
    return utils::CheckpointDecision::PreferRecompute;
  };
  const Tensor q = randn({2, 64, 32}).requires_grad_(), k = randn({2, 128, 32}), v = randn({2, 128, 16});
  Tensor out = utils::checkpoint(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2])};
      },
      {q, k, v}, options)[0];
  EXPECT_EQ(names, std::vector<std::string>{"fused_attention"});
  // It saves a tensor of its own (the log-sum-exp), so a policy cannot replay it: MustSave says so.
  options.policy = [](const utils::OpInfo&) { return utils::CheckpointDecision::MustSave; };
  expect_error(
      [&] {
        utils::checkpoint([](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{scaled_dot_product_attention(in[0], in[1], in[2])};
        }, {q, k, v}, options);
      },
      "fused_attention saves a tensor it made itself");
}

TEST_F(FusedAttention, TheBackendChoice) {
  EXPECT_EQ(attention_backend(), AttentionBackend::Auto);  // the tests run without EMBER_ATTENTION_BACKEND
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 4});
  {
    // Auto takes the fused path: one fused_attention node, and nothing of size [L, S] saved.
    testutil::SavedTensors saved;
    autograd::SavedTensorHooksGuard watch(saved.hooks());
    Tensor out = scaled_dot_product_attention(q.detach().requires_grad_(), k, v);
    EXPECT_EQ(std::string(out.grad_fn()->name()), "fused_attention");
  }
  {
    AttentionBackendGuard math(AttentionBackend::Math);
    Tensor out = scaled_dot_product_attention(q.detach().requires_grad_(), k, v);
    EXPECT_NE(std::string(out.grad_fn()->name()), "fused_attention");
  }
  // An additive mask that needs a gradient goes to the math path under Auto, and is an error
  // when the fused path is forced.
  const Tensor bias = randn({3, 5}).requires_grad_();
  Tensor out = scaled_dot_product_attention(q, k, v, bias);
  EXPECT_NE(std::string(out.grad_fn()->name()), "fused_attention");
  AttentionBackendGuard fused(AttentionBackend::Fused);
  expect_error([&] { scaled_dot_product_attention(q, k, v, bias); },
               "[scaled_dot_product_attention] the fused backend was chosen");
  expect_error([&] { scaled_dot_product_attention(q, k, v, bias); }, "query [2, 3, 4], key [2, 5, 4]");
  // The weights come from the math path only: MultiheadAttention's need_weights says so.
  expect_error([&] { attention_weights(q, k); }, "need_weights");
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = randn({5, 2, 8});
  expect_error([&] { mha.forward(x, x, x, Tensor(), true); },
               "[scaled_dot_product_attention] the attention weights were asked for (need_weights)");
  EXPECT_EQ(mha.forward(x, x, x, Tensor(), false).first.shape(), Shape({5, 2, 8}));
  expect_error([&] { set_attention_backend(static_cast<AttentionBackend>(7)); }, "[set_attention_backend] unknown");
  EXPECT_STREQ(attention_backend_name(AttentionBackend::Fused), "fused");
}

// Runs once without EMBER_ATTENTION_BACKEND and, by tests/CMakeLists.txt, with it set to math and
// to a value that is none of the names.
TEST_F(FusedAttention, BackendFromTheEnvironment) {
  const char* set = std::getenv("EMBER_ATTENTION_BACKEND");
  const std::string value = set == nullptr ? "" : set;
  const Tensor q = randn({3, 4}), k = randn({5, 4}), v = randn({5, 4});
  if (value.empty()) {
    EXPECT_EQ(attention_backend(), AttentionBackend::Auto);
  } else if (value == "math") {
    EXPECT_EQ(attention_backend(), AttentionBackend::Math);
    EXPECT_NE(std::string(scaled_dot_product_attention(q.detach().requires_grad_(), k, v).grad_fn()->name()),
              "fused_attention");
  } else {
    expect_error([&] { scaled_dot_product_attention(q, k, v); },
                 "[EMBER_ATTENTION_BACKEND] must be 'auto', 'math' or 'fused', got '" + value + "'");
    set_attention_backend(AttentionBackend::Fused);  // the program's own choice replaces the bad one
    EXPECT_EQ(std::string(scaled_dot_product_attention(q.detach().requires_grad_(), k, v).grad_fn()->name()),
              "fused_attention");
  }
}

}  // namespace
