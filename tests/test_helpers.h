#pragma once
// Assertions shared by the test files.
#include <gtest/gtest.h>

#include <algorithm>
#include <any>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/autograd/saved_tensor.h"
#include "core/check.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace ember::testutil {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A fixture that seeds the default generator before each test, so that a test's random values do
// not depend on the tests that ran before it.
template <uint64_t Seed>
class SeededTest : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(Seed); }
};

// Expects `fn` to throw an ember::Error whose message contains `needle`.
inline void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an ember::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// The message of the ember::Error that `fn` throws, or a failure (and "") when it throws none.
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an ember::Error";
  return "";
}

// Both tensors hold exactly the same bits (-0 is not +0, a NaN must be the same NaN), on any
// devices.
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  if (a.nbytes() == 0) return true;
  const Tensor ca = a.to(kCPU).contiguous(), cb = b.to(kCPU).contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

// Every element, in row-major order, as doubles.
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Every element, in row-major order, as int64: indices and integer results.
inline std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// Each element equal to its expected value; where NaN is expected, any NaN.
inline void expect_same_values(const Tensor& t, const std::vector<double>& expected) {
  const std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i] << ", expected NaN";
    } else {
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
    }
  }
}

// A bfloat16 result of oneDNN (products, convolutions) against the float32 computation of the same
// bfloat16 inputs rounded once (the staged path). Both accumulate in float32 and round once; they
// differ only in the order of the additions, so by at most one bfloat16 step, and most elements
// round alike.
inline void expect_within_a_bfloat16_step(const Tensor& onednn, const Tensor& staged) {
  ASSERT_EQ(onednn.dtype(), kBFloat16);
  ASSERT_EQ(staged.dtype(), kBFloat16);
  ASSERT_EQ(onednn.shape(), staged.shape());
  const std::vector<double> got = values(onednn), want = values(staged);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  int differing = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), 0x1p-7 * std::abs(want[i]) + 1e-5 * scale) << "element " << i;
    differing += got[i] != want[i];
  }
  EXPECT_LE(differing, static_cast<int>(got.size() / 10) + 1) << "most elements should round alike";
}

// gelu's tanh form as a one-argument function, for tables of activations.
inline Tensor gelu_tanh(const Tensor& x) { return gelu(x, GeluApproximate::Tanh); }

// Element-wise |got - expected| <= tol.
inline void expect_near(const Tensor& t, const std::vector<double>& expected, double tol = 1e-5) {
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

// A float64 leaf with values in [lo, hi) that requires grad: an input for gradcheck.
inline Tensor leaf(const Shape& shape, double lo = -2.0, double hi = 2.0) {
  return (rand(shape, kFloat64) * (hi - lo) + lo).detach().requires_grad_();
}

// Expects autograd::gradcheck(fn, inputs, ...) to pass; on failure prints its first mismatch.
#define EXPECT_GRADCHECK(fn, ...)                                     \
  do {                                                                \
    auto result = ::ember::autograd::gradcheck(fn, __VA_ARGS__);      \
    EXPECT_TRUE(result.ok) << result.message;                         \
  } while (0)

// Every tensor saved for backward while it is alive, seen through the saved-tensor hooks: what an
// op keeps for its backward.
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

// Sets one of ember's run-time choices (core/cpu_settings.h) while alive, and puts back the one
// it found.
template <class T, T (*Get)(), void (*Set)(T)>
class ChoiceScope {
 public:
  explicit ChoiceScope(T value) : before_(Get()) { Set(value); }
  ~ChoiceScope() { Set(before_); }
  ChoiceScope(const ChoiceScope&) = delete;
  ChoiceScope& operator=(const ChoiceScope&) = delete;

 private:
  T before_;
};

// Runs CPU convolutions on ember's im2col reference while alive, for tests of what that kernel
// allocates (the oneDNN path's scratch is its own, Note [Convolution through oneDNN]).
struct ReferenceConvScope : ChoiceScope<ConvBackend, &conv_backend, &set_conv_backend> {
  ReferenceConvScope() : ChoiceScope(ConvBackend::Reference) {}
};

// Runs float products on a backend while alive (Note [Two BLAS for one gemm]).
using GemmBackendScope = ChoiceScope<GemmBackend, &gemm_backend, &set_gemm_backend>;

// Runs ember's CPU loops at a vector level while alive (Note [SIMD dispatch]).
using SimdLevelScope = ChoiceScope<SimdLevel, &simd_level, &set_simd_level>;

// The gemm backends this build has: OpenBLAS, and oneDNN where built with it.
inline std::vector<GemmBackend> gemm_backends() {
  if (has_onednn()) return {GemmBackend::OpenBLAS, GemmBackend::OneDNN};
  return {GemmBackend::OpenBLAS};
}

// A copy within one dtype moves bits (core/cpu/elementwise.cpp's copy_bits, cuda/copy.cu): every
// 16-bit pattern, NaN payloads included, survives clone() and a transposed contiguous() on
// `device` unchanged, where widening and narrowing would rewrite the NaNs.
inline void expect_sixteen_bit_copies_keep_every_pattern(Device device) {
  for (DType d : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor patterns = empty({256, 256}, d);
    auto* bits = static_cast<uint16_t*>(patterns.raw_data());
    for (uint32_t p = 0; p < 65536; ++p) bits[p] = static_cast<uint16_t>(p);
    const Tensor there = patterns.to(device);
    const Tensor cloned = there.clone().cpu(), transposed = there.t().contiguous().cpu();
    const auto* c = static_cast<const uint16_t*>(cloned.raw_data());
    const auto* t = static_cast<const uint16_t*>(transposed.raw_data());
    for (uint32_t p = 0; p < 65536; ++p) {
      ASSERT_EQ(c[p], p) << std::hex << p;
      ASSERT_EQ(t[(p % 256) * 256 + p / 256], p) << std::hex << p;
    }
  }
}

}  // namespace ember::testutil
