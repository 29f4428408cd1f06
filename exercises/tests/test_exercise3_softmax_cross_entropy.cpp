// Exercise 3 (exercises/README.md): the backward of softmax and of the fused cross-entropy, by
// gradcheck and against ember's softmax and cross_entropy.
#include <gtest/gtest.h>

#include "ex3_softmax_cross_entropy.h"
#include "test_helpers.h"

using namespace ember;
using testutil::leaf;
using testutil::values;

namespace {

// Gradients of sum(f(x) * g) by both functions, from the same x and g.
template <class Mine, class Theirs>
void expect_same_gradients(const Tensor& x, Mine mine, Theirs theirs, double tol) {
  const Tensor x1 = x.detach().requires_grad_(), x2 = x.detach().requires_grad_();
  const Tensor y1 = mine(x1), y2 = theirs(x2);
  const Tensor g = randn(y2.shape(), x.dtype());
  sum(y1 * g).backward();
  sum(y2 * g).backward();
  testutil::expect_near(y1, values(y2), tol);
  ASSERT_TRUE(x1.grad().defined());
  EXPECT_EQ(x1.grad().dtype(), x.dtype());
  testutil::expect_near(x1.grad(), values(x2.grad()), tol);
}

}  // namespace

TEST(Exercise3Softmax, Gradcheck) {
  manual_seed(1);
  for (int64_t dim : {0, 1, 2, -1})
    EXPECT_GRADCHECK([dim](const std::vector<Tensor>& in) { return exercises::softmax(in[0], dim); }, {leaf({3, 4, 5})});
}

TEST(Exercise3Softmax, MatchesEmbersSoftmax) {
  manual_seed(2);
  for (DType dtype : {kFloat32, kFloat64})
    for (int64_t dim : {0, 1, -1}) {
      SCOPED_TRACE(dim);
      expect_same_gradients(randn({4, 6}, dtype) * 3.0, [dim](const Tensor& x) { return exercises::softmax(x, dim); },
                            [dim](const Tensor& x) { return softmax(x, dim); }, dtype == kFloat32 ? 1e-6 : 1e-12);
    }
}

TEST(Exercise3CrossEntropy, Gradcheck) {
  manual_seed(3);
  const Tensor target = randint(0, 5, {6});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return exercises::cross_entropy(in[0], target); },
                   {leaf({6, 5})});
}

// Through a linear layer, so the gradient flows on to the weight.
TEST(Exercise3CrossEntropy, GradcheckBehindALinearLayer) {
  manual_seed(4);
  const Tensor x = randn({8, 3}, kFloat64), target = randint(0, 4, {8});
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& in) { return exercises::cross_entropy(matmul(x, in[0]), target); },
                   {leaf({3, 4})});
}

TEST(Exercise3CrossEntropy, MatchesEmbersCrossEntropy) {
  manual_seed(5);
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor target = randint(0, 7, {9});
    expect_same_gradients(randn({9, 7}, dtype) * 4.0,
                          [&](const Tensor& x) { return exercises::cross_entropy(x, target); },
                          [&](const Tensor& x) { return cross_entropy(x, target); }, dtype == kFloat32 ? 1e-6 : 1e-12);
  }
}

// Logits of 1000 would overflow exp() without the forward's shift by the row maximum; the
// backward's exp(logits - lse) must not overflow either.
TEST(Exercise3CrossEntropy, LargeLogitsStayFinite) {
  const Tensor logits = (tensor({1000, 0, -1000, 999, 998, 0}, kFloat64).reshape({2, 3})).requires_grad_();
  const Tensor target = tensor({0, 2}, kInt64);
  exercises::cross_entropy(logits, target).backward();
  for (double v : values(logits.grad())) EXPECT_TRUE(std::isfinite(v)) << v;
  const Tensor expected = logits.detach().requires_grad_();
  cross_entropy(expected, target).backward();
  testutil::expect_near(logits.grad(), values(expected.grad()), 1e-12);
}

TEST(Exercise3CrossEntropy, RejectsMismatchedShapes) {
  testutil::expect_error([] { exercises::cross_entropy(zeros({4, 3}), zeros({5}, kInt64)); },
                         "[exercise_cross_entropy] expects logits [N, C] and a target [N] with N > 0, got shapes [4, 3] "
                         "and [5]");
}
