// Exercise 2 (exercises/README.md): matmul's backward, by gradcheck and against ember's matmul.
#include <gtest/gtest.h>

#include "ex2_matmul.h"
#include "test_helpers.h"

using namespace ember;
using testutil::leaf;

namespace {

Tensor exercise_matmul(const std::vector<Tensor>& in) { return exercises::matmul(in[0], in[1]); }

// Batched, broadcast and shared-weight cases: the gradient of a broadcast operand must come back
// in that operand's shape.
const std::vector<std::pair<Shape, Shape>> kShapes = {
    {{3, 4}, {4, 5}},        {{2, 3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}},
    {{3, 4}, {2, 4, 5}},     {{2, 1, 3, 4}, {3, 4, 2}}, {{1, 4}, {4, 1}},
};

}  // namespace

TEST(Exercise2Matmul, Gradcheck) {
  manual_seed(1);
  for (const auto& [a, b] : kShapes) EXPECT_GRADCHECK(exercise_matmul, {leaf(a), leaf(b)});
}

TEST(Exercise2Matmul, GradcheckWithOneInputRequiringGrad) {
  manual_seed(2);
  EXPECT_GRADCHECK(exercise_matmul, {leaf({3, 4}), leaf({4, 5}).detach()});
  EXPECT_GRADCHECK(exercise_matmul, {leaf({3, 4}).detach(), leaf({4, 5})});
}

// A transposed view as an operand: the saved tensor is not contiguous.
TEST(Exercise2Matmul, GradcheckThroughATransposedOperand) {
  manual_seed(3);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& in) { return exercises::matmul(in[0].t(), in[1]); },
                   {leaf({4, 3}), leaf({4, 5})});
}

TEST(Exercise2Matmul, MatchesEmbersMatmul) {
  manual_seed(4);
  for (const auto& [a_shape, b_shape] : kShapes) {
    const Tensor a = randn(a_shape), b = randn(b_shape);
    const Tensor a1 = a.detach().requires_grad_(), b1 = b.detach().requires_grad_();
    const Tensor a2 = a.detach().requires_grad_(), b2 = b.detach().requires_grad_();
    const Tensor y1 = exercises::matmul(a1, b1), y2 = matmul(a2, b2);
    const Tensor g = randn(y2.shape());
    sum(y1 * g).backward();
    sum(y2 * g).backward();
    testutil::expect_near(y1, testutil::values(y2), 1e-5);
    ASSERT_TRUE(a1.grad().defined() && b1.grad().defined());
    testutil::expect_near(a1.grad(), testutil::values(a2.grad()), 1e-4);
    testutil::expect_near(b1.grad(), testutil::values(b2.grad()), 1e-4);
  }
}

TEST(Exercise2Matmul, RejectsVectors) {
  testutil::expect_error([] { exercises::matmul(zeros({3}), zeros({3, 2})); },
                         "[exercise_matmul] expects two tensors of at least 2 dims, got shapes [3] and [3, 2]");
}
