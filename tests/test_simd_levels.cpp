// Note [SIMD dispatch]: ember's CPU loops run at every vector level the CPU has (AVX-512, AVX2,
// the baseline) and must agree: sums, max and fingerprints bit for bit (integer sums, and float
// sums in a fixed lane order, Note [Lane reductions]), the float math within the bounds of Note
// [Vectorisable float math] (the wider levels fuse multiply-adds). The baseline's results are
// the reference. On a CPU without AVX2 only the baseline runs, and the tests compare it with
// itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <functional>
#include <vector>

#include "core/generator.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::SimdLevelScope;
using testutil::values;

namespace {

std::vector<SimdLevel> wider_levels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::AVX2, SimdLevel::AVX512})
    if (l <= best_simd_level()) levels.push_back(l);
  return levels;
}

// fn's result at the baseline and at each wider level; compare(level name, got, baseline).
void at_every_level(const std::function<std::vector<double>()>& fn,
                    const std::function<void(const char*, const std::vector<double>&, const std::vector<double>&)>&
                        compare) {
  std::vector<double> baseline;
  {
    SimdLevelScope scope(SimdLevel::Baseline);
    baseline = fn();
  }
  for (SimdLevel level : wider_levels()) {
    SimdLevelScope scope(level);
    compare(simd_level_name(level), fn(), baseline);
  }
}

void expect_bitwise(const char* level, const std::vector<double>& got, const std::vector<double>& baseline) {
  ASSERT_EQ(got.size(), baseline.size()) << level;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], baseline[i]) << level << ", element " << i;
}

// |got - baseline| <= absolute + ulps float32 units in the last place of the baseline's value.
std::function<void(const char*, const std::vector<double>&, const std::vector<double>&)> within(double absolute,
                                                                                                double ulps) {
  return [=](const char* level, const std::vector<double>& got, const std::vector<double>& baseline) {
    ASSERT_EQ(got.size(), baseline.size()) << level;
    const double eps = std::ldexp(1.0, -23);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::abs(got[i] - baseline[i]), absolute + ulps * eps * std::abs(baseline[i]))
          << level << ", element " << i << ": " << got[i] << " vs " << baseline[i];
  };
}

TEST(SimdLevels, StartAtTheWidestAndRefuseWhatTheCpuLacks) {
  // ctest runs this suite without EMBER_SIMD and again with EMBER_SIMD=baseline (tests/CMakeLists.txt).
  const char* env = std::getenv("EMBER_SIMD");
  if (env == nullptr) {
    EXPECT_EQ(simd_level(), best_simd_level());
  } else if (std::string(env) == "baseline") {
    EXPECT_EQ(simd_level(), SimdLevel::Baseline);
  }
  EXPECT_STREQ(simd_level_name(SimdLevel::AVX512), "avx512");
  if (best_simd_level() < SimdLevel::AVX512)
    expect_error([] { set_simd_level(SimdLevel::AVX512); }, "[set_simd_level] this CPU cannot run avx512");
  for (SimdLevel l : wider_levels()) {
    SimdLevelScope scope(l);
    EXPECT_EQ(simd_level(), l);
  }
}

// Note [Choices from the environment]: a bad value fails the first CPU kernel call with an
// ember::Error, not the process; ctest runs this test alone with EMBER_SIMD=avx3.
TEST(SimdLevels, ABadEnvironmentFailsTheFirstKernelCall) {
  const char* env = std::getenv("EMBER_SIMD");
  if (env == nullptr || std::string(env) != "avx3") GTEST_SKIP() << "runs with EMBER_SIMD=avx3";
  expect_error([] { ones({3}); }, "[EMBER_SIMD] must be 'baseline', 'avx2' or 'avx512', got 'avx3'");
  expect_error([] { ones({3}); }, "[EMBER_SIMD]");  // and every call after it
  set_simd_level(best_simd_level());                 // until a level is chosen
  EXPECT_EQ(sum(ones({3})).item(), 3.0);
}

TEST(SimdLevels, SumsMaxAndFingerprintsAreBitwiseTheSame) {
  manual_seed(3);
  const Tensor x = randn({37, 1001});  // rows that end in a partial lane group
  const Tensor long_row = randn({300007});
  const Tensor heads = x.narrow(1, 0, 40).view({37, 2, 20}).transpose(0, 1);  // short rows, read as tiles
  at_every_level(
      [&] {
        std::vector<double> r = values(sum(x, {1}));
        for (double v : values(max(x, {1}))) r.push_back(v);
        for (double v : values(sum(x, {0}))) r.push_back(v);
        r.push_back(sum(long_row).item());
        r.push_back(static_cast<double>(fingerprint(x) >> 11));  // 53 bits: exact in a double
        r.push_back(static_cast<double>(fingerprint(x.t()) >> 11));
        r.push_back(static_cast<double>(fingerprint(long_row) >> 11));
        r.push_back(static_cast<double>(fingerprint(heads) >> 11));
        return r;
      },
      expect_bitwise);
}

TEST(SimdLevels, FloatMathStaysWithinItsBounds) {
  manual_seed(4);
  const Tensor x = randn({4099}) * 4.0;
  const Tensor positive = rand({4099}) * 100.0 + 1e-3;
  // Each function is within ~1.5 ulp of the exact value at every level (Note [Vectorisable float
  // math]), so two levels are within ~3 of each other; sigmoid composes a few roundings. erf is
  // bounded absolutely (9e-8), so gelu = x (1 + erf(x / sqrt 2)) / 2 is too: where 1 + erf cancels
  // (x around -3), a few ulps of erf are many of gelu.
  at_every_level([&] { return values(exp(x)); }, within(0, 3));
  at_every_level([&] { return values(log(positive)); }, within(0, 3));
  at_every_level([&] { return values(tanh(x)); }, within(0, 4));
  at_every_level([&] { return values(sigmoid(x)); }, within(1e-45, 6));
  at_every_level([&] { return values(gelu(x)); }, within(2e-7, 4));
  // The activations' one-pass backwards (Note [Activation backwards in one pass]) compose the same
  // functions with a few more roundings, and erf's absolute bound carries into gelu's.
  const Tensor g = randn({4099});
  for (Tensor (*f)(const Tensor&) : {&sigmoid, &ember::tanh, &silu, &gelu}) {
    at_every_level([&] {
      const Tensor leaf_x = x.clone().requires_grad_();
      f(leaf_x).backward(g);
      return values(leaf_x.grad());
    }, within(1e-6, 8));
  }
}

TEST(SimdLevels, RowKernelsAndATransformerBlockAgree) {
  manual_seed(5);
  const Tensor scores = randn({2, 3, 70, 70});
  at_every_level([&] { return values(softmax(scores, -1)); }, within(0, 8));
  at_every_level([&] { return values(log_softmax(scores, -1)); }, within(1e-7, 8));
  const Tensor q = randn({2, 3, 70, 16}), k = randn({2, 3, 70, 16}), v = randn({2, 3, 70, 16});
  // The output mixes v's rows with those weights, and the sums cancel: absolute.
  at_every_level([&] { return values(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, /*is_causal=*/true)); }, within(1e-6, 8));

  // A whole block, forward and backward: every loop above and LayerNorm's, GELU's derivative,
  // softmax's backward. Absolute: gradients sum many terms that cancel.
  nn::TransformerBlock block(32, 4);
  const Tensor input = randn({2, 24, 32});
  at_every_level(
      [&] {
        block.zero_grad();
        Tensor in = input.clone().requires_grad_();
        Tensor out = block(in);
        sum(out * out).backward();
        std::vector<double> r = values(out);
        for (double g : values(in.grad())) r.push_back(g);
        for (const Tensor& p : block.parameters())
          for (double g : values(p.grad())) r.push_back(g);
        return r;
      },
      [](const char* level, const std::vector<double>& got, const std::vector<double>& baseline) {
        ASSERT_EQ(got.size(), baseline.size()) << level;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], baseline[i], 1e-4 * (1.0 + std::abs(baseline[i]))) << level << ", value " << i;
      });
}

}  // namespace
