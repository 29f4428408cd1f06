#pragma once
// Comparing ember's tensors with PyTorch's golden values (tests/fixtures), element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::testutil {

// Element-wise |got - expected| <= atol + rtol * |expected|; a NaN matches only a NaN.
struct Tol {
  double atol, rtol;
};
constexpr Tol kFloat32Tol{1e-5, 1e-4};
constexpr Tol kFloat64Tol{1e-10, 1e-9};

inline std::string index_str(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d > 0; --d) {
    idx[d - 1] = flat % shape[d - 1];
    flat /= shape[d - 1];
  }
  return shape_str(idx);
}

// Compares every element; on failure reports the worst one (relative to its allowance) and how
// many elements are out of tolerance. Integer tensors have to match exactly.
inline ::testing::AssertionResult all_close(const std::string& what, const Tensor& got, const Tensor& expected, Tol tol) {
  if (!got.defined()) return ::testing::AssertionFailure() << what << ": ember's tensor is undefined";
  if (got.shape() != expected.shape())
    return ::testing::AssertionFailure() << what << ": shape " << shape_str(got.shape()) << ", expected "
                                         << shape_str(expected.shape());
  if (got.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << what << ": dtype " << got.dtype() << ", expected " << expected.dtype();
  if (!is_floating(expected.dtype())) tol = {0.0, 0.0};
  const std::vector<double> a = got.to_vector<double>(), b = expected.to_vector<double>();
  int64_t worst = -1, bad = 0;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double allowed = tol.atol + tol.rtol * std::abs(b[i]);
    // Equal values match, infinities of one sign included (inf - inf is NaN), and so do two NaNs.
    const bool same = a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]));
    const double diff = same ? 0.0 : std::abs(a[i] - b[i]);
    // An infinite expected value allows an infinite difference: only the value itself matches it.
    const double ratio = same ? 0.0 : std::isnan(diff) || !std::isfinite(b[i]) ? INFINITY : diff / allowed;
    if (ratio > 1.0) ++bad;
    if (worst < 0 || ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = static_cast<int64_t>(i);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const size_t w = static_cast<size_t>(worst);
  std::ostringstream os;
  os.precision(9);
  os << what << ": " << bad << " of " << a.size() << " element(s) out of tolerance (atol " << tol.atol << ", rtol "
     << tol.rtol << "); worst at " << index_str(worst, got.shape()) << ": got " << a[w] << ", expected " << b[w]
     << ", |diff| " << std::abs(a[w] - b[w]) << " > allowed " << tol.atol + tol.rtol * std::abs(b[w]);
  return ::testing::AssertionFailure() << os.str();
}

// The tolerance of a result's dtype: float64 results are held to float64's.
inline Tol tol_of(const Tensor& t) { return t.dtype() == kFloat64 ? kFloat64Tol : kFloat32Tol; }

}  // namespace ember::testutil

// `got` against the tensor `name` of the Fixture `f` (tests/fixture.h), within tol_of(got).
#define EXPECT_MATCHES_FIXTURE(f, name, got) \
  EXPECT_TRUE(::ember::testutil::all_close(name, got, (f).get(name), ::ember::testutil::tol_of(got)))
