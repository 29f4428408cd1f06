#pragma once
// Assertions shared by the test files.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace ember::testutil {

// Expects `fn` to throw an ember::Error whose message contains `needle`.
inline void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an ember::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Every element, in row-major order, as doubles.
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Element-wise |got - expected| <= tol.
inline void expect_near(const Tensor& t, const std::vector<double>& expected, double tol = 1e-5) {
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
}

}  // namespace ember::testutil
