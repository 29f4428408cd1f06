// The oneDNN convolution (Note [Convolution through oneDNN]) against ember's im2col reference:
// forward and the three gradients over many geometries, what falls back, threads and the
// primitive cache. Skipped in a build without oneDNN (EMBER_DNNL=OFF), except the error check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/cpu/dnnl_conv.h"
#include "core/cpu/dnnl_matmul.h"
#include "core/generator.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::expect_within_a_bfloat16_step;

namespace {

struct Case {
  int64_t n, c, h, w, oc, kh, kw;
  Pair stride, padding, dilation;
  bool bias;
};

// The output and the gradients of sum(out * r) for a fixed random r: input, weight, bias.
struct Result {
  Tensor out, grad_x, grad_w, grad_b;
};

Result run(const Case& k, ConvBackend backend, DType dtype = kFloat32) {
  manual_seed(7);  // the same inputs on both backends
  const Tensor x = randn({k.n, k.c, k.h, k.w}, dtype).requires_grad_();
  const Tensor w = randn({k.oc, k.c, k.kh, k.kw}, dtype).requires_grad_();
  const Tensor b = k.bias ? randn({k.oc}, dtype).requires_grad_() : Tensor();
  set_conv_backend(backend);
  const Tensor out = conv2d(x, w, b, k.stride, k.padding, k.dilation);
  sum(out * randn(out.shape(), dtype)).backward();
  return {out.detach(), x.grad(), w.grad(), k.bias ? b.grad() : Tensor()};
}

// Within float32 rounding of sums of many products: relative to the largest reference value.
void expect_close(const Tensor& got, const Tensor& want, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = got.to_vector<double>(), r = want.to_vector<double>();
  double scale = 0;
  for (double v : r) scale = std::max(scale, std::abs(v));
  const double tol = 2e-5 * scale + 1e-6;
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], r[i], tol) << "element " << i;
}

void expect_identical(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
}

class ConvDnnl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_onednn()) GTEST_SKIP() << "built without oneDNN (EMBER_DNNL)";
    backend_before_ = conv_backend();
    threads_before_ = get_num_threads();
  }
  void TearDown() override {
    if (!has_onednn()) return;
    set_conv_backend(backend_before_);
    set_num_threads(threads_before_);
  }

 private:
  ConvBackend backend_before_ = ConvBackend::Reference;
  int threads_before_ = 1;
};

const std::vector<Case> kCases = {
    {2, 3, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},        // small, bias
    {8, 16, 14, 14, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, false},   // a ResNet-20 stage
    {1, 16, 14, 14, 32, 3, 3, {2, 2}, {1, 1}, {1, 1}, false},   // batch 1, stride 2
    {4, 16, 7, 7, 8, 1, 1, {1, 1}, {0, 0}, {1, 1}, true},       // 1x1 (the reference skips im2col)
    {3, 16, 9, 9, 32, 1, 1, {2, 2}, {0, 0}, {1, 1}, false},     // 1x1 stride 2: a ResNet shortcut
    {5, 1, 28, 28, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, false},    // one input channel (a first layer)
    {3, 5, 11, 13, 7, 3, 5, {1, 2}, {2, 1}, {1, 1}, true},      // odd sizes, rectangular kernel
    {2, 4, 15, 12, 6, 3, 3, {1, 1}, {2, 2}, {2, 2}, true},      // dilation
    {2, 3, 17, 19, 5, 3, 2, {2, 3}, {1, 0}, {2, 3}, false},     // dilation and stride per axis
    {2, 3, 5, 5, 4, 5, 5, {1, 1}, {0, 0}, {1, 1}, true},        // kernel as large as the input
    {1, 2, 4, 4, 3, 3, 3, {1, 1}, {3, 3}, {1, 1}, true},        // padding wider than the kernel
    {2, 3, 13, 13, 4, 2, 2, {3, 3}, {0, 0}, {1, 1}, false},     // stride larger than the kernel
    {7, 3, 6, 6, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},        // more samples than threads, odd
    {2, 24, 9, 7, 20, 3, 1, {1, 1}, {1, 0}, {1, 1}, true},      // channels not a multiple of 8
};

TEST_F(ConvDnnl, MatchesTheReferenceForwardAndGradients) {
  for (size_t i = 0; i < kCases.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "case " << i);
    const Case& k = kCases[i];
    const Result want = run(k, ConvBackend::Reference);
    const int64_t runs_before = cpu::dnnl_conv_counts().runs;
    const Result got = run(k, ConvBackend::OneDNN);
    // forward, input gradient, weight gradient: all three ran on oneDNN
    EXPECT_EQ(cpu::dnnl_conv_counts().runs - runs_before, 3);
    expect_close(got.out, want.out, "output");
    expect_close(got.grad_x, want.grad_x, "input gradient");
    expect_close(got.grad_w, want.grad_w, "weight gradient");
    if (k.bias) expect_close(got.grad_b, want.grad_b, "bias gradient");
  }
}

TEST_F(ConvDnnl, SameResultsAtEveryThreadCountAsTheReference) {
  const Case& k = kCases[1];
  const Result want = run(k, ConvBackend::Reference);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(testing::Message() << threads << " threads");
    set_num_threads(threads);
    const Result got = run(k, ConvBackend::OneDNN);
    expect_close(got.out, want.out, "output");
    expect_close(got.grad_x, want.grad_x, "input gradient");
    expect_close(got.grad_w, want.grad_w, "weight gradient");
    // and reproducible: the same primitive (cached) gives the same bits again
    const Result again = run(k, ConvBackend::OneDNN);
    expect_identical(again.out, got.out);
    expect_identical(again.grad_x, got.grad_x);
    expect_identical(again.grad_w, got.grad_w);
  }
}

// bfloat16 on a CPU with AVX512-BF16: oneDNN's convolutions against the reference staged through
// float32 (the same bfloat16 inputs, float32 arithmetic, each output rounded once).
TEST_F(ConvDnnl, BFloat16MatchesTheStagedReferenceWithinABFloat16Step) {
  if (!cpu::cpu_has_bfloat16_products()) GTEST_SKIP() << "this CPU has no AVX512-BF16: bfloat16 is staged";
  for (size_t i = 0; i < kCases.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "case " << i);
    const Case& k = kCases[i];
    const Result want = run(k, ConvBackend::Reference, kBFloat16);
    const int64_t runs_before = cpu::dnnl_conv_counts().runs;
    const Result got = run(k, ConvBackend::OneDNN, kBFloat16);
    EXPECT_EQ(cpu::dnnl_conv_counts().runs - runs_before, 3);
    expect_within_a_bfloat16_step(got.out, want.out);
    expect_within_a_bfloat16_step(got.grad_x, want.grad_x);
    expect_within_a_bfloat16_step(got.grad_w, want.grad_w);
    if (k.bias) expect_within_a_bfloat16_step(got.grad_b, want.grad_b);
  }
}

TEST_F(ConvDnnl, BFloat16WithoutTheInstructionsOrWithTheReferenceIsStaged) {
  // The reference backend never runs oneDNN, whatever the dtype; on a CPU without AVX512-BF16
  // neither does the oneDNN backend for bfloat16.
  const Case& k = kCases[0];
  const int64_t runs_before = cpu::dnnl_conv_counts().runs;
  const Result staged = run(k, ConvBackend::Reference, kBFloat16);
  EXPECT_EQ(cpu::dnnl_conv_counts().runs, runs_before);
  EXPECT_EQ(staged.out.dtype(), kBFloat16);
  EXPECT_EQ(staged.grad_w.dtype(), kBFloat16);
  if (!cpu::cpu_has_bfloat16_products()) {
    const Result onednn = run(k, ConvBackend::OneDNN, kBFloat16);
    EXPECT_EQ(cpu::dnnl_conv_counts().runs, runs_before);
    EXPECT_TRUE(testutil::bitwise_equal(onednn.out, staged.out));
  }
}

TEST_F(ConvDnnl, Float64RunsTheReference) {
  const Case& k = kCases[0];
  const Result want = run(k, ConvBackend::Reference, kFloat64);
  const int64_t runs_before = cpu::dnnl_conv_counts().runs;
  const Result got = run(k, ConvBackend::OneDNN, kFloat64);
  EXPECT_EQ(cpu::dnnl_conv_counts().runs, runs_before);
  expect_identical(got.out, want.out);
  expect_identical(got.grad_x, want.grad_x);
  expect_identical(got.grad_w, want.grad_w);
}

TEST_F(ConvDnnl, EmptyChannelsRunTheReference) {
  // no input channels: the output is the bias alone and the weight gradient is empty
  set_conv_backend(ConvBackend::OneDNN);
  const Tensor x = zeros({2, 0, 5, 5}), w = zeros({3, 0, 3, 3}), b = randn({3});
  const Tensor out = conv2d(x, w, b, {1, 1}, {1, 1});
  EXPECT_EQ(out.shape(), (Shape{2, 3, 5, 5}));
  EXPECT_EQ(max(abs(out - b.view({1, 3, 1, 1}))).item<float>(), 0.0f);
}

TEST_F(ConvDnnl, TheCacheStaysBounded) {
  set_conv_backend(ConvBackend::OneDNN);
  const Tensor w = randn({2, 1, 1, 1});
  for (int64_t size = 1; size <= 80; ++size) conv2d(randn({1, 1, 1, size}), w, Tensor());  // 80 geometries
  EXPECT_LE(cpu::dnnl_conv_counts().cached, 64u);
  EXPECT_GE(cpu::dnnl_conv_counts().cached, 1u);
}

TEST(ConvBackendChoice, OneDNNNeedsABuildWithIt) {
  if (has_onednn()) {
    const ConvBackend before = conv_backend();
    set_conv_backend(ConvBackend::Reference);
    EXPECT_EQ(conv_backend(), ConvBackend::Reference);
    set_conv_backend(ConvBackend::OneDNN);
    EXPECT_EQ(conv_backend(), ConvBackend::OneDNN);
    set_conv_backend(before);
  } else {
    EXPECT_EQ(conv_backend(), ConvBackend::Reference);
    expect_error([] { set_conv_backend(ConvBackend::OneDNN); }, "built without oneDNN");
  }
}

}  // namespace
