// The user-side custom op of examples/swish.h: the custom Function's gradients against finite
// differences (float64) in x and beta, for a scalar, a per-feature and a per-channel beta; the
// custom and the composed versions against each other; the graph each one records; bad input.
#include <gtest/gtest.h>

#include "core/generator.h"
#include "core/ops.h"
#include "examples/swish.h"
#include "test_helpers.h"

using namespace ember;
using examples::swish;
using examples::swish_composed;
using testutil::expect_error;
using testutil::leaf;

namespace {

class CustomOp : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(0); }
};

// x and beta with these shapes; beta in [0.2, 3) so the check also sees steep sigmoids.
void expect_swish_gradcheck(const Shape& x_shape, const Shape& beta_shape) {
  EXPECT_GRADCHECK([](auto& v) { return swish(v[0], v[1]); }, {leaf(x_shape, -3.0, 3.0), leaf(beta_shape, 0.2, 3.0)});
}

TEST_F(CustomOp, GradcheckScalarBeta) { expect_swish_gradcheck({4, 3}, {}); }
TEST_F(CustomOp, GradcheckPerFeatureBeta) { expect_swish_gradcheck({4, 3}, {3}); }
TEST_F(CustomOp, GradcheckPerChannelBeta) { expect_swish_gradcheck({2, 3, 2, 2}, {3, 1, 1}); }
TEST_F(CustomOp, GradcheckBetaOfTheInputsShape) { expect_swish_gradcheck({2, 3}, {2, 3}); }

TEST_F(CustomOp, GradcheckOnlyOneInputRequiresGrad) {
  Tensor beta = leaf({3}, 0.2, 3.0).detach();
  EXPECT_GRADCHECK([beta](auto& v) { return swish(v[0], beta); }, {leaf({4, 3})});
  Tensor x = leaf({4, 3}).detach();
  EXPECT_GRADCHECK([x](auto& v) { return swish(x, v[0]); }, {leaf({3}, 0.2, 3.0)});
}

TEST_F(CustomOp, CustomAndComposedAgree) {
  Tensor x_data = randn({5, 3, 4, 4}, kFloat64), beta_data = rand({3, 1, 1}, kFloat64) * 3.0;
  Tensor g = randn({5, 3, 4, 4}, kFloat64);
  Tensor xs[2], betas[2], ys[2];
  for (int version = 0; version < 2; ++version) {
    xs[version] = x_data.detach().requires_grad_();
    betas[version] = beta_data.detach().requires_grad_();
    ys[version] = version == 0 ? swish(xs[version], betas[version]) : swish_composed(xs[version], betas[version]);
    ys[version].backward(g);
  }
  EXPECT_LT(max(abs(ys[0] - ys[1])).item(), 1e-14);
  EXPECT_LT(max(abs(xs[0].grad() - xs[1].grad())).item(), 1e-13);
  EXPECT_EQ(betas[0].grad().shape(), (Shape{3, 1, 1}));
  EXPECT_LT(max(abs(betas[0].grad() - betas[1].grad())).item(), 1e-11);
}

TEST_F(CustomOp, MatchesTheClosedFormAtKnownPoints) {
  // beta = 0 makes sigmoid 1/2: y = x/2, dy/dx = 1/2, dy/dbeta = x^2/4.
  Tensor x = tensor({-2.0, 1.0, 4.0}, kFloat64).requires_grad_(), beta = zeros({}, kFloat64).requires_grad_();
  Tensor y = swish(x, beta);
  testutil::expect_near(y, {-1.0, 0.5, 2.0}, 1e-15);
  sum(y).backward();
  testutil::expect_near(x.grad(), {0.5, 0.5, 0.5}, 1e-15);
  testutil::expect_near(beta.grad(), {(4.0 + 1.0 + 16.0) / 4.0}, 1e-14);
}

TEST_F(CustomOp, TheCustomOpIsOneNode) {
  Tensor x = randn({4, 3}).requires_grad_(), beta = ones({3}).requires_grad_();
  Tensor custom = swish(x, beta), composed = swish_composed(x, beta);
  EXPECT_STREQ(custom.grad_fn()->name(), "swish");
  EXPECT_EQ(custom.grad_fn()->next.size(), 2u);
  EXPECT_EQ(custom.grad_fn()->saved_tensors()->size(), 3u);  // x, beta, sigmoid(beta * x)
  EXPECT_STREQ(composed.grad_fn()->name(), "mul");            // x * sigmoid(mul(beta, x))
}

TEST_F(CustomOp, BadInputNamesTheOpAndTheShapes) {
  expect_error([] { swish(zeros({4, 3}), zeros({2, 4, 3})); },
               "[swish] beta of shape [2, 4, 3] must broadcast to the input's shape [4, 3]");
  expect_error([] { swish(zeros({4, 3}), zeros({5})); }, "[swish] shapes [4, 3] and [5]");
  expect_error([] { swish(zeros({4}, kInt64), zeros({}, kInt64)); },
               "[swish] expects x and beta of one floating point dtype, got int64 and int64");
  expect_error([] { swish(zeros({4}), zeros({}, kFloat64)); }, "got float32 and float64");
  expect_error([] { swish_composed(Tensor(), zeros({})); }, "[swish] expects defined tensors");
}

}  // namespace
