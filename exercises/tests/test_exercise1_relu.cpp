// Exercise 1 (exercises/README.md): ReLU's backward, by gradcheck and against ember's relu.
#include <gtest/gtest.h>

#include "ex1_relu.h"
#include "test_helpers.h"

using namespace ember;
using testutil::values;

namespace {

// float64 leaves with |x| in [0.1, 2): finite differences across the kink at 0 would not be a
// derivative.
Tensor away_from_zero(const Shape& shape) {
  const Tensor magnitude = rand(shape, kFloat64) * 1.9 + 0.1;
  const Tensor negative = rand(shape, kFloat64) < 0.5;
  return where(negative, -magnitude, magnitude).detach().requires_grad_();
}

Tensor exercise_relu(const std::vector<Tensor>& in) { return exercises::relu(in[0]); }

}  // namespace

TEST(Exercise1Relu, Gradcheck) {
  manual_seed(1);
  for (const Shape& shape : {Shape{7}, Shape{3, 4}, Shape{2, 3, 5}}) EXPECT_GRADCHECK(exercise_relu, {away_from_zero(shape)});
}

TEST(Exercise1Relu, GradcheckInsideAGraph) {
  manual_seed(2);
  const Tensor w = away_from_zero({4, 3});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return exercises::relu(in[0]) * in[0]; }, {w});
}

// The same values and gradients as ember's relu in float32, with exact zeros among the inputs
// (whose derivative is 0 in both).
TEST(Exercise1Relu, MatchesEmbersRelu) {
  manual_seed(3);
  const Tensor x = randn({6, 5}) * (rand({6, 5}) > 0.25);
  const Tensor g = randn({6, 5});
  const Tensor mine = x.detach().requires_grad_(), theirs = x.detach().requires_grad_();
  const Tensor y_mine = exercises::relu(mine), y_theirs = relu(theirs);
  sum(y_mine * g).backward();
  sum(y_theirs * g).backward();
  EXPECT_EQ(values(y_mine), values(y_theirs));
  ASSERT_TRUE(mine.grad().defined());
  EXPECT_EQ(mine.grad().dtype(), kFloat32);
  EXPECT_EQ(values(mine.grad()), values(theirs.grad()));
}

TEST(Exercise1Relu, TheDerivativeAtZeroIsZero) {
  const Tensor x = zeros({3}, kFloat64).requires_grad_();
  sum(exercises::relu(x)).backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(3, 0.0));
}

TEST(Exercise1Relu, RejectsIntegers) {
  testutil::expect_error([] { exercises::relu(zeros({2}, kInt64)); }, "[exercise_relu] expects a floating point tensor");
}
