// bfloat16 and float16 as dtypes (Note [Sixteen-bit floats]): the conversions bitwise against
// PyTorch, promotion, limits, factories, printing, casts with their gradients, modules and
// kernels staged through float32 (Note [Sixteen-bit floats through float32]). Every op's values
// in both dtypes are the op table's columns (tests/test_op_table.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/kernels.h"
#include "core/ops.h"
#include "core/optimizer_step.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "tests/fixture.h"
#include "tests/test_helpers.h"

using namespace ember;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <class T>
uint16_t narrow(float f) {
  return T(f).bits;
}

std::vector<float> narrow_inputs(const testutil::Fixture& fx) {
  std::vector<float> out;
  for (int64_t b : fx.get("narrow_in").to_vector<int64_t>()) out.push_back(float_of(static_cast<uint32_t>(b)));
  return out;
}

TEST(SixteenBit, NarrowingMatchesPyTorchBitwise) {
  const auto fx = testutil::Fixture::load("sixteen_bit_conversions.txt");
  const std::vector<float> in = narrow_inputs(fx);
  const auto want_bf16 = fx.get("narrow_bfloat16").to_vector<int64_t>();
  const auto want_f16 = fx.get("narrow_float16").to_vector<int64_t>();
  ASSERT_EQ(in.size(), want_bf16.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(narrow<bfloat16>(in[i]), want_bf16[i]) << "bfloat16 of float bits 0x" << std::hex << bits_of(in[i]);
    ASSERT_EQ(narrow<float16>(in[i]), want_f16[i]) << "float16 of float bits 0x" << std::hex << bits_of(in[i]);
  }
  // The tensor cast goes through the copy kernel: the same bits.
  const Tensor t = from_vector(in, {static_cast<int64_t>(in.size())});
  const auto bf16 = t.to(kBFloat16).to_vector<bfloat16>();
  const auto f16 = t.to(kFloat16).to_vector<float16>();
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(bf16[i].bits, want_bf16[i]) << "element " << i;
    ASSERT_EQ(f16[i].bits, want_f16[i]) << "element " << i;
  }
}

// FNV-1a over the little-endian float32 bits, as the fixture's generator computes it.
uint64_t fnv1a(const std::vector<float>& values) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (float v : values) {
    const uint32_t u = bits_of(v);
    for (int k = 0; k < 4; ++k) {
      h ^= (u >> (8 * k)) & 0xffu;
      h *= 0x100000001B3ull;
    }
  }
  return h;
}

template <class T>
std::vector<float> widen_every_pattern() {
  std::vector<float> out;
  for (uint32_t p = 0; p < 65536; ++p) out.push_back(static_cast<float>(T::from_bits(static_cast<uint16_t>(p))));
  return out;
}

TEST(SixteenBit, WideningOfEveryPatternMatchesPyTorch) {
  const auto fx = testutil::Fixture::load("sixteen_bit_conversions.txt");
  auto expected = [&](const char* name) {
    const auto halves = fx.get(name).to_vector<int64_t>();
    return static_cast<uint64_t>(halves[0]) << 32 | static_cast<uint64_t>(halves[1]);
  };
  EXPECT_EQ(fnv1a(widen_every_pattern<bfloat16>()), expected("widen_bfloat16"));
  EXPECT_EQ(fnv1a(widen_every_pattern<float16>()), expected("widen_float16"));
  // Spot values that pin the layouts.
  EXPECT_EQ(static_cast<float>(bfloat16::from_bits(0x3f80)), 1.0f);
  EXPECT_EQ(static_cast<float>(float16::from_bits(0x3c00)), 1.0f);
  EXPECT_EQ(static_cast<float>(float16::from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(static_cast<float>(float16::from_bits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(float16::from_bits(0x8000)), 0.0f);
  EXPECT_TRUE(std::signbit(static_cast<float>(float16::from_bits(0x8000))));
}

// Widening then narrowing gives back every pattern; NaNs come back as the NaN the narrowing rule
// makes of them (Note [Sixteen-bit floats]).
TEST(SixteenBit, EveryPatternRoundTrips) {
  for (uint32_t p = 0; p < 65536; ++p) {
    const auto h = static_cast<uint16_t>(p);
    const bool bf16_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    const bool f16_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    ASSERT_EQ(narrow<bfloat16>(bfloat16::from_bits(h)), bf16_nan ? 0xffff : h) << std::hex << p;
    ASSERT_EQ(narrow<float16>(float16::from_bits(h)), f16_nan ? (h | 0x200) : h) << std::hex << p;
  }
}

// Widening and narrowing would rewrite NaNs (the test above); a copy within a dtype does not.
TEST(SixteenBit, CopiesWithinADtypeKeepEveryPattern) { testutil::expect_sixteen_bit_copies_keep_every_pattern(kCPU); }

TEST(SixteenBit, DtypeProperties) {
  EXPECT_EQ(element_size(kBFloat16), 2u);
  EXPECT_EQ(element_size(kFloat16), 2u);
  EXPECT_STREQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(kHalf), "float16");
  EXPECT_TRUE(is_floating(kBFloat16));
  EXPECT_TRUE(is_floating(kFloat16));
  // torch.finfo's values.
  EXPECT_EQ(finfo(kBFloat16).eps, 0.0078125);
  EXPECT_EQ(finfo(kBFloat16).max, 3.3895313892515355e+38);
  EXPECT_EQ(finfo(kBFloat16).tiny, 1.1754943508222875e-38);
  EXPECT_EQ(finfo(kFloat16).eps, 0.0009765625);
  EXPECT_EQ(finfo(kFloat16).max, 65504.0);
  EXPECT_EQ(finfo(kFloat16).tiny, 6.103515625e-05);
  EXPECT_EQ(finfo(kFloat32).eps, 1.1920928955078125e-07);
  EXPECT_EQ(finfo(kBFloat16).max, static_cast<float>(bfloat16::from_bits(0x7f7f)));
  testutil::expect_error([] { finfo(kInt64); }, "[finfo] expects a floating point dtype, got int64");
}

TEST(SixteenBit, PromotionFollowsPyTorch) {
  const Tensor b = ones({2}, kBFloat16), h = ones({2}, kFloat16);
  EXPECT_EQ((b + h).dtype(), kFloat32);  // neither holds the other
  EXPECT_EQ((b + ones({2})).dtype(), kFloat32);
  EXPECT_EQ((h + ones({2}, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((b + ones({2}, kInt64)).dtype(), kBFloat16);
  EXPECT_EQ((h * ones({2}, kUInt8)).dtype(), kFloat16);
  EXPECT_EQ((b * 2.5).dtype(), kBFloat16);  // a number keeps the tensor's dtype
  EXPECT_EQ((3.0 - h).dtype(), kFloat16);
  EXPECT_EQ((ones({2}, kInt64) / ones({2}, kInt64)).dtype(), kFloat32);
  EXPECT_EQ((b < h).dtype(), kUInt8);
}

TEST(SixteenBit, FactoriesAndPrinting) {
  for (DType d : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    EXPECT_EQ(zeros({2, 3}, d).dtype(), d);
    testutil::expect_near(arange(4.0, d), {0, 1, 2, 3}, 0.0);
    manual_seed(3);
    const Tensor r = rand({1000}, d);
    EXPECT_EQ(r.dtype(), d);
    EXPECT_GE(min(r).item(), 0.0);
    EXPECT_LE(max(r).item(), 1.0);
    EXPECT_NEAR(mean(randn({4000}, d)).item(), 0.0, 0.1);
    std::ostringstream os;
    os << tensor({1.5, -2.0}).to(d);
    EXPECT_NE(os.str().find(std::string("dtype=") + dtype_name(d)), std::string::npos) << os.str();
    EXPECT_NE(os.str().find("1.5"), std::string::npos) << os.str();
  }
  // full rounds to nearest even: 1/3 is 0x3eab in bfloat16 and 0x3555 in float16.
  EXPECT_EQ(full({1}, 1.0 / 3.0, kBFloat16).to_vector<bfloat16>()[0].bits, 0x3eab);
  EXPECT_EQ(full({1}, 1.0 / 3.0, kFloat16).to_vector<float16>()[0].bits, 0x3555);
  EXPECT_EQ(full({1}, 70000.0, kFloat16).item(), INFINITY);  // through float32, as PyTorch's full
  testutil::expect_error([] { zeros({1}, kFloat16).fill_(70000.0); }, "[fill_] value 70000 cannot be converted");
}

TEST(SixteenBit, CastsCarryGradientsBackInTheInputsDtype) {
  const Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  const Tensor y = x.to(kBFloat16) * 3.0;
  EXPECT_EQ(y.dtype(), kBFloat16);
  sum(y).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  testutil::expect_near(x.grad(), {3, 3, 3}, 0.0);
  // To an integer dtype the result leaves the graph, as in PyTorch (x.round().long()).
  const Tensor ids = (x * 1.4).to(kInt64);
  EXPECT_FALSE(ids.requires_grad());
  EXPECT_EQ(ids.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_FALSE(x.to(kUInt8).requires_grad());
}

// Kernels without a 16-bit path of their own are staged through float32: in-place ops write
// through views, accumulating kernels see their output's old values.
// A staged kernel (one without a 16-bit path): out = 10 x, its output argument 1.
void probe_times_ten(const Tensor& x, const Tensor& out) { out.copy_(x * 10.0); }

TEST(SixteenBit, StagedKernelsWriteThroughViewsAndAccumulate) {
  kernels::Kernel<void(const Tensor&, const Tensor&)> times_ten{"probe_times_ten", kernels::Writes{1}};
  kernels::add_kernel(times_ten, DeviceType::CPU, &probe_times_ten);
  for (DType d : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    Tensor a = arange(6.0, d).reshape({2, 3});
    Tensor column = a.transpose(0, 1).select(0, 1);  // a[:, 1], a strided view
    times_ten[kCPU](column, column);                 // in place: staged, written back through the strides
    testutil::expect_near(a, {0, 10, 2, 3, 40, 5}, 0.0);
    const Tensor b = a.clone();
    b.transpose(0, 1).select(0, 1).mul_(0.1);  // the unary kernel's own 16-bit loop, through such a view
    testutil::expect_near(b, {0, 1, 2, 3, 4, 5}, 0.0);
    // linear's product accumulates into its output, which holds the bias (Note [A bias in the
    // product]).
    const Tensor w = ones({2, 3}, d), bias = full({2}, 0.5, d);
    testutil::expect_near(linear(a, w, bias), {12.5, 12.5, 48.5, 48.5}, 0.0);
    // index_select's backward adds the gradients of repeated ids into one row (index_add).
    const Tensor base = ones({3}, d).requires_grad_();
    sum(index_select(base, 0, tensor({0, 0, 2}, kInt64)) * 2.0).backward();
    EXPECT_EQ(base.grad().dtype(), d);
    testutil::expect_near(base.grad(), {4, 0, 2}, 0.0);
  }
}

// Note [Sixteen-bit elementwise loops]: the CPU's unary, binary, where and masked_scale kernels
// compute on 16-bit tensors themselves and give, bit for bit, their float32 result on the
// widened inputs rounded once, which is what staging computed. Every op, at every SIMD level;
// inputs of both signs (log of a negative is NaN on both paths), broadcast and transposed.
TEST(SixteenBit, ElementwiseKernelsRoundTheirFloat32ResultOnce) {
  using kernels::BinaryOp;
  using kernels::UnaryOp;
  manual_seed(41);
  for (SimdLevel level : {SimdLevel::Baseline, SimdLevel::AVX2, SimdLevel::AVX512}) {
    if (level > best_simd_level()) continue;
    const testutil::SimdLevelScope at_level(level);
    for (DType d : {kBFloat16, kFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " at SIMD level " + simd_level_name(level));
      const Tensor x = (randn({9, 7}) * 3.0).to(d).t(), y_row = (randn({1, 9}) * 3.0).to(d);
      const Tensor y = y_row.expand({7, 9});
      const Tensor wide_x = x.to(kFloat32), wide_y = y_row.to(kFloat32).expand({7, 9});
      for (int i = 0; i < static_cast<int>(UnaryOp::Count); ++i) {
        const auto op = static_cast<UnaryOp>(i);
        SCOPED_TRACE("unary op " + std::to_string(i));
        const Tensor got = empty({7, 9}, d), wide = empty({7, 9});
        kernels::unary[kCPU](op, x, got, 0.5, 1.5);
        kernels::unary[kCPU](op, wide_x, wide, 0.5, 1.5);
        EXPECT_TRUE(testutil::bitwise_equal(got, wide.to(d)));
      }
      for (int i = 0; i < static_cast<int>(BinaryOp::Count); ++i) {
        const auto op = static_cast<BinaryOp>(i);
        SCOPED_TRACE("binary op " + std::to_string(i));
        const DType out = kernels::is_comparison(op) ? kUInt8 : d;
        const Tensor got = empty({7, 9}, out), wide = empty({7, 9}, kernels::is_comparison(op) ? kUInt8 : kFloat32);
        kernels::binary[kCPU](op, x, y, got);
        kernels::binary[kCPU](op, wide_x, wide_y, wide);
        EXPECT_TRUE(testutil::bitwise_equal(got, wide.to(out)));
      }
      const Tensor keep = rand({7, 9}) < 0.6;
      const Tensor got = empty({7, 9}, d), wide = empty({7, 9});
      kernels::masked_scale[kCPU](x.contiguous(), keep, 1.0 / 0.6, got);  // its contract: contiguous
      kernels::masked_scale[kCPU](wide_x.contiguous(), keep, 1.0 / 0.6, wide);
      EXPECT_TRUE(testutil::bitwise_equal(got, wide.to(d)));
      EXPECT_TRUE(testutil::bitwise_equal(where(keep, x, y), where(keep, wide_x, wide_y).to(d)));
    }
  }
}

// The softmax kernels compute 16-bit rows in float32 (core/cpu/softmax.cpp): forward and
// backward, softmax and log_softmax, scaled, causal and with masked rows, at every SIMD level,
// bitwise the float32 kernel's result rounded once. Rows of 3 to 300 columns cover the lane
// loops' tails.
TEST(SixteenBit, SoftmaxKernelsRoundTheirFloat32ResultOnce) {
  manual_seed(43);
  const double inf = std::numeric_limits<double>::infinity();
  const kernels::SoftmaxSpec specs[] = {{}, {.log = true}, {.scale = 0.125}, {.scale = 0.5, .causal_rows = 6},
                                        {.log = true, .causal_rows = 6}, {.scale = 0.5, .empty_rows_masked = true}};
  for (SimdLevel level : {SimdLevel::Baseline, SimdLevel::AVX2, SimdLevel::AVX512}) {
    if (level > best_simd_level()) continue;
    const testutil::SimdLevelScope at_level(level);
    for (DType d : {kBFloat16, kFloat16})
      for (int64_t cols : {3, 37, 300}) {
        Tensor x = (randn({12, cols}) * 4.0).to(d);
        x.narrow(0, 11, 1).fill_(-inf);  // a row with nothing visible
        const Tensor g = randn({12, cols}).to(d), wide_x = x.to(kFloat32), wide_g = g.to(kFloat32);
        for (const kernels::SoftmaxSpec& spec : specs) {
          SCOPED_TRACE(testing::Message() << dtype_name(d) << " at " << simd_level_name(level) << ", " << cols
                                          << " columns, log " << spec.log << " scale " << spec.scale << " causal "
                                          << spec.causal_rows);
          const Tensor y = empty(x.shape(), d), wide_y = empty(x.shape());
          kernels::softmax[kCPU](x, y, spec);
          kernels::softmax[kCPU](wide_x, wide_y, spec);
          EXPECT_TRUE(testutil::bitwise_equal(y, wide_y.to(d)));
          const Tensor gx = empty(x.shape(), d), wide_gx = empty(x.shape());
          kernels::softmax_backward[kCPU](y, g, gx, spec);
          kernels::softmax_backward[kCPU](y.to(kFloat32), wide_g, wide_gx, spec);
          EXPECT_TRUE(testutil::bitwise_equal(gx, wide_gx.to(d)));
        }
      }
  }
}

// A kernel declared without its Writes cannot be staged: a 16-bit tensor is an error naming it.
void probe_fill(const Tensor& out, double value) { out.fill_(value); }

// Reductions accumulate in float32 and round once, as PyTorch 2.15's: the figures are its (var of
// 0..99 in float16 is 841.5 and std 29.015625, where float16 squares summed in float16 overflow;
// a cumsum of 1000 ones reaches 1000 in bfloat16, which cannot add 1 to 256 itself).
TEST(SixteenBit, ReductionsAccumulateInFloat32) {
  const Tensor x = arange(100, kFloat32).to(kFloat16);
  EXPECT_EQ(var(x, {0}).item(), 841.5);
  EXPECT_EQ(var(x, {0}, 0).item(), 833.0);
  EXPECT_EQ(stddev(x, {0}).item(), 29.015625);
  EXPECT_EQ(stddev(x.to(kBFloat16), {0}).item(), 29.0);
  EXPECT_EQ(var(arange(1000, kFloat32).to(kFloat16), {0}).item(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(cumsum(ones({1000}, kBFloat16), 0).to(kFloat64).to_vector<double>().back(), 1000.0);
  EXPECT_EQ(mean(full({100000}, 0.1, kFloat16)).item(), 0.0999755859375);
  // The gradient comes back through the casts in x's dtype.
  const Tensor leaf = x.detach().requires_grad_();
  stddev(leaf, {0}).backward();
  EXPECT_EQ(leaf.grad().dtype(), kFloat16);
  // A loss's mean too (PyTorch: 100 and 9.5; the float16 sums are inf and 9504).
  const Tensor tens = full({1000}, 10.0, kFloat16).requires_grad_(), zero = zeros({1000}, kFloat16);
  const Tensor mse = mse_loss(tens, zero);
  EXPECT_EQ(mse.dtype(), kFloat16);
  EXPECT_EQ(mse.item(), 100.0);
  EXPECT_EQ(smooth_l1_loss(tens, zero).item(), 9.5);
  EXPECT_EQ(mse_loss(tens, zero, Reduction::Sum).item(), std::numeric_limits<double>::infinity());
  mse.backward();
  EXPECT_EQ(tens.grad().dtype(), kFloat16);
  EXPECT_EQ(tens.grad().to(kFloat64).to_vector<double>()[0], full({1}, 0.02, kFloat16).item());  // 2 * 10 / 1000
}

TEST(SixteenBit, AKernelThatCannotBeStagedRefusesThemByName) {
  kernels::Kernel<kernels::FillFn> probe{"probe"};
  kernels::add_kernel(probe, DeviceType::CPU, &probe_fill);
  const Tensor f = zeros({2});
  probe[kCPU](f, 2.0);  // float32 passes straight through
  testutil::expect_near(f, {2, 2}, 0.0);
  testutil::expect_error([] {
    kernels::Kernel<kernels::FillFn> unstaged{"probe"};
    kernels::add_kernel(unstaged, DeviceType::CPU, &probe_fill);
    unstaged[kCPU](zeros({2}, kBFloat16), 1.0);
  }, "[probe] has no bfloat16 kernel");
  // The fused optimizer step computes in float32 and float64 only; 16-bit parameters are refused
  // by its check, and the optimizers give them the composed update instead.
  EXPECT_FALSE(fused_step_accepts(ones({3}, kBFloat16), ones({3}, kBFloat16)));
}

TEST(SixteenBit, ModulesConvertAndComputeCloseToFloat32) {
  manual_seed(5);
  nn::Linear fp32(8, 4);
  const Tensor x = randn({16, 8});
  const Tensor want = fp32.forward(x);
  for (DType d : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    nn::Linear half(8, 4);
    half.load_state_dict(fp32.state_dict());
    half.to(d);
    EXPECT_EQ(half.weight.dtype(), d);
    const Tensor got = half.forward(x.to(d));
    EXPECT_EQ(got.dtype(), d);
    const double tol = d == kBFloat16 ? 0.05 : 0.01;
    EXPECT_LT(max(abs(got.to(kFloat32) - want)).item(), tol);
    sum(got).backward();
    EXPECT_EQ(half.weight.grad().dtype(), d);
    // A 16-bit state dict loads into a float32 model: load_state_dict converts, as PyTorch's copies.
    nn::Linear back(8, 4);
    back.load_state_dict(half.state_dict());
    EXPECT_EQ(back.weight.dtype(), kFloat32);
    EXPECT_EQ(max(abs(back.weight - half.weight.to(kFloat32))).item(), 0.0);
  }
}

// The optimizers take 16-bit parameters: a few steps on a bfloat16 or float16 model lower its
// loss.
TEST(SixteenBit, OptimizersStepSixteenBitParameters) {
  for (DType d : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(d));
    manual_seed(9);
    nn::Linear model(6, 1);
    model.to(d);
    const Tensor x = randn({32, 6}).to(d), y = sum(x, {1}, true) * 0.5;
    optim::Adam opt(model.parameters(), optim::AdamOptions(0.05));
    auto loss = [&] { return mean(pow(model.forward(x) - y, 2.0)); };
    const double first = loss().item();
    for (int step = 0; step < 20; ++step) {
      opt.zero_grad();
      loss().backward();
      opt.step();
    }
    EXPECT_EQ(model.weight.dtype(), d);
    EXPECT_LT(loss().item(), 0.5 * first);
  }
}

// A 16-bit parameter steps as a float32 copy against float32 state (Note [Sixteen-bit
// parameters step in float32]): bitwise the float32 step of the widened parameter, rounded once,
// fused or composed, and the state survives a state_dict round trip in float32.
TEST(SixteenBit, SixteenBitParametersStepInFloat32) {
  for (DType d : {kBFloat16, kFloat16})
    for (bool fused : {true, false}) {
      SCOPED_TRACE(dtype_name(d) + (fused ? std::string(" fused") : std::string(" composed")));
      manual_seed(3);
      const Tensor half = randn({5, 7}).to(d).requires_grad_();
      const Tensor wide = half.detach().to(kFloat32).requires_grad_();
      optim::Adam a({half}, optim::AdamOptions(0.01).fused(fused));
      optim::Adam b({wide}, optim::AdamOptions(0.01).fused(fused));
      for (int step = 0; step < 3; ++step) {
        const Tensor g = randn({5, 7}).to(d);
        half.set_grad(g);
        wide.set_grad(g.to(kFloat32));
        a.step();
        b.step();
        EXPECT_EQ(half.dtype(), d);
        EXPECT_TRUE(testutil::bitwise_equal(half, wide.detach().to(d))) << "step " << step;
        NoGradGuard no_grad;
        wide.copy_(half);  // both go on from the rounded parameter
      }
      const optim::StateDict state = a.state_dict();
      for (const char* key : {"state.0.exp_avg", "state.0.exp_avg_sq"}) {
        EXPECT_EQ(state.at(key).dtype(), kFloat32) << key;
        EXPECT_TRUE(testutil::bitwise_equal(state.at(key), b.state_dict().at(key))) << key;
      }
      optim::Adam resumed({half}, optim::AdamOptions(0.01).fused(fused));
      resumed.load_state_dict(state);
      EXPECT_EQ(resumed.state_dict().at("state.0.exp_avg").dtype(), kFloat32);
    }
}

}  // namespace
