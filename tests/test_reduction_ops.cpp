// The reductions: sum, mean, max, min and argmax over dims, var and std, softmax and log_softmax,
// vector_norm, normalize and cosine_similarity, cumsum, and sort, argsort and topk. Values worked
// out by hand (ties, NaN, empty dims, integer dtypes), PyTorch parity of forward and gradients
// (fixtures from tests/fixtures/make_fixtures.py and make_everyday_fixtures.py) and the errors for
// bad input. The op table (tests/op_table.cpp, Note [The op table]) adds the checks every op gets:
// gradcheck in float64 (dims, keepdim and the variants included), the float32 and 16-bit columns
// and integer inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::testutil;

using ReductionOps = SeededTest<12>;

// --- sum, mean, max, min, argmax ---

TEST_F(ReductionOps, Reductions) {
  Tensor x = arange(6).reshape({2, 3});
  expect_near(sum(x), {15});
  expect_near(sum(x, {0}), {3, 5, 7});
  expect_near(sum(x, {1}, true), {3, 12});
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  expect_near(sum(x, {-1, 0}), {15});
  expect_near(mean(x, {1}), {1, 4});
  expect_near(max(x, {0}), {3, 4, 5});
  expect_near(min(x, {1}), {0, 3});
  expect_near(max(x), {5});
  Tensor y = tensor({1, 5, 5, 2}).reshape({2, 2});
  EXPECT_EQ(argmax(y, 1).dtype(), kInt64);
  expect_near(argmax(y, 1), {1, 0});
  expect_near(argmax(y, 0, true), {1, 0});
  // A NaN is greater than everything: the first NaN wins, as in PyTorch 2.15 (index 1 for
  // [1, nan, 3, nan]; per row of [[1, nan], [3, 0]]: 1, 0).
  const double nan = std::nan("");
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    EXPECT_EQ(argmax(tensor({1, nan, 3, nan}).to(dtype), 0).item(), 1.0) << dtype;
    expect_near(argmax(tensor({1, nan, 3, 0}).to(dtype).reshape({2, 2}), 1), {1, 0});
    EXPECT_EQ(argmax(tensor({nan, 5, nan}).to(dtype), 0).item(), 0.0) << dtype;
  }
  // max's gradient goes to the NaNs that made the maximum NaN, shared, as PyTorch's (it was NaN
  // everywhere: 0 * (g / 0)).
  const Tensor a = tensor({1, nan, 3, nan}).requires_grad_();
  max(a).backward();
  expect_near(a.grad(), {0, 0.5, 0, 0.5});
  Tensor z = zeros({2, 3, 4});
  EXPECT_EQ(sum(z, {0, 2}).shape(), (Shape{3}));
  expect_near(sum(arange(24).reshape({2, 3, 4}), {0, 2}), {60, 92, 124});
  expect_near(sum(ones({0, 3}), {0}), {0, 0, 0});
  Tensor mask = ones({1000}) > 0.5;  // uint8
  EXPECT_EQ(sum(mask).dtype(), kInt64);
  EXPECT_EQ(sum(mask).item(), 1000.0);  // no wrap-around at 256
}

TEST_F(ReductionOps, MaxSharesTheGradientBetweenTies) {
  Tensor x = tensor({1, 3, 3}).requires_grad_();
  max(x).backward();
  expect_near(x.grad(), {0, 0.5, 0.5});
}

// --- softmax ---

TEST_F(ReductionOps, SoftmaxIsStableAndNormalised) {
  Tensor x = tensor({1000, 1001, 1002});
  Tensor p = softmax(x, 0);
  expect_near(p, {0.09003057, 0.24472847, 0.66524096});
  expect_near(log_softmax(x, 0), {-2.40760596, -1.40760596, -0.40760596});
  expect_near(sum(softmax(randn({4, 7}), 1), {1}), {1, 1, 1, 1});
}

// --- var, std ---

TEST_F(ReductionOps, VarAndStdValues) {
  const Tensor x = tensor({1, 2, 3, 4, 2, 4, 6, 8}).reshape({2, 4});
  expect_near(var(x, {1}), {5.0 / 3.0, 20.0 / 3.0});          // unbiased: / (4 - 1)
  expect_near(var(x, {1}, 0), {1.25, 5.0});                   // biased: / 4
  expect_near(var(x, {}), {var(x.reshape({8}), {0}).item<double>()});  // empty dims: all of them
  expect_near(stddev(x, {0}, 1, true), {std::sqrt(0.5), std::sqrt(2.0), std::sqrt(4.5), std::sqrt(8.0)});
  EXPECT_EQ(stddev(x, {0}, 1, true).shape(), (Shape{1, 4}));
  // N <= correction divides by zero, as PyTorch: 0 / 0 is NaN, a positive sum / 0 is inf.
  EXPECT_TRUE(std::isnan(var(tensor({3}), {0}).item<double>()));
  EXPECT_TRUE(std::isinf(var(tensor({1, 2}), {0}, 2).item<double>()));
}

TEST_F(ReductionOps, VarErrors) {
  expect_error([] { var(zeros({3}, kInt64), {0}); }, "[var] expects a floating point tensor");
  expect_error([] { var(zeros({3}), {0}, -1); }, "[var] correction must be >= 0, got -1");
  expect_error([] { var(zeros({3}), {1}); }, "[var] dim 1 is out of range");
  expect_error([] { stddev(zeros({3, 2}), {0, 0}); }, "[stddev] dim [0, 0] names a dim more than once");
}

TEST_F(ReductionOps, VarStdParity) {
  Fixture f = Fixture::load("parity_var_std.txt");
  Tensor x = fixture_leaf(f, "x");
  Tensor v = var(x, {0, 2}), s = stddev(x, {1}, 0, true);
  (sum(v * f.get("w_var")) + sum(s * f.get("w_std"))).backward();
  EXPECT_MATCHES_FIXTURE(f, "out_var", v);
  EXPECT_MATCHES_FIXTURE(f, "out_std", s);
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
}

// --- vector_norm, normalize, cosine_similarity ---

TEST_F(ReductionOps, VectorNormByHand) {
  const Tensor x = tensor({3, -4, 0, 0, 0, 0}).reshape({2, 3});
  expect_near(vector_norm(x, 2.0, {1}), {5, 0});
  expect_near(vector_norm(x), {5});
  expect_near(vector_norm(x, 1.0, {1}, true), {7, 0});
  EXPECT_EQ(vector_norm(x, 1.0, {1}, true).shape(), (Shape{2, 1}));
  expect_near(vector_norm(x, kInf, {1}), {4, 0});
  expect_near(vector_norm(x, -kInf, {0}), {0, 0, 0});
  expect_near(vector_norm(x, 0.0, {1}), {2, 0});
  expect_near(vector_norm(x, 3.0, {1}), {std::cbrt(91.0), 0}, 1e-5);
  // The gradient where the norm is 0 is 0 (PyTorch's subgradient), for every ord.
  for (double ord : {2.0, 1.0, kInf, 3.0, 0.5}) {
    SCOPED_TRACE(ord);
    const Tensor z = zeros({3}).requires_grad_();
    vector_norm(z, ord).backward();
    expect_near(z.grad(), {0, 0, 0});
  }
  // ord 0 counts: no gradient at all.
  const Tensor y = tensor({1, 0, 2}).requires_grad_();
  vector_norm(y, 0.0).backward();
  EXPECT_FALSE(y.grad().defined());
  // dtype converts first; 16-bit inputs compute in float32 and return their dtype.
  EXPECT_EQ(vector_norm(x, 2.0, {}, false, kFloat64).dtype(), kFloat64);
  const Tensor h = full({300}, 1.0, kBFloat16);
  EXPECT_EQ(vector_norm(h).dtype(), kBFloat16);
  EXPECT_NEAR(vector_norm(h).item(), std::sqrt(300.0), 0.1);  // a bfloat16 running sum would stop at 256
  for (double ord : {2.0, 1.0, kInf, -kInf, 3.0, 0.5, 1.5, -1.0})
    EXPECT_GRADCHECK([ord](auto& v) { return vector_norm(v[0], ord, {1}); }, {leaf({3, 4}, 0.2, 2.0)});
}

TEST_F(ReductionOps, VectorNormErrors) {
  expect_error([] { vector_norm(zeros({2}, kInt64)); }, "[vector_norm] expects a floating point tensor, got int64");
  expect_error([] { vector_norm(zeros({2}, kFloat64), 2.0, {}, false, kFloat32); },
               "[vector_norm] cannot compute a float64 tensor of shape [2] in float32");
  expect_error([] { vector_norm(zeros({0, 3}), kInf, {0}); },
               "[vector_norm] cannot take the inf norm over dim 0 of a tensor of shape [0, 3]");
  expect_near(vector_norm(zeros({0, 3}), 2.0, {0}), {0, 0, 0});  // an empty sum is 0, as PyTorch's
  expect_error([] { vector_norm(zeros({2, 3}), 2.0, {2}); }, "dim 2 is out of range");
  expect_error([] { vector_norm(zeros({2, 3}), 2.0, {1, -1}); },
               "[vector_norm] dim [1, -1] names a dim more than once");
}

// NORM_VARIANTS of make_everyday_fixtures.py: (name, ord, dims, keepdim).
void check_vector_norm_parity(const std::string& file) {
  struct Variant {
    std::string name;
    double ord;
    Shape dims;
    bool keepdim;
  };
  const std::vector<Variant> variants = {{"2", 2.0, {1}, false},     {"1", 1.0, {1}, true},
                                         {"inf", kInf, {1}, false},  {"neg_inf", -kInf, {0}, false},
                                         {"3", 3.0, {0, 1}, false},  {"half", 0.5, {1}, false},
                                         {"1_5", 1.5, {1}, false}};
  Fixture f = Fixture::load(file);
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    Tensor x = fixture_leaf(f, "x");
    Tensor out = vector_norm(x, v.ord, v.dims, v.keepdim);
    EXPECT_MATCHES_FIXTURE(f, "out_" + v.name, out);
    sum(out * f.get("w_" + v.name)).backward();
    EXPECT_MATCHES_FIXTURE(f, "grad_" + v.name, x.grad());
  }
}
TEST_F(ReductionOps, VectorNormParity) { check_vector_norm_parity("everyday_vector_norm.txt"); }
TEST_F(ReductionOps, VectorNormParityFloat64) { check_vector_norm_parity("everyday_vector_norm_f64.txt"); }

TEST_F(ReductionOps, NormalizeAndCosineSimilarityByHand) {
  expect_near(normalize(tensor({3, 4, 0, 0}).reshape({2, 2})), {0.6, 0.8, 0, 0});
  expect_near(normalize(tensor({1, -3}), 1.0, 0), {0.25, -0.75});
  const Tensor a = tensor({1, 0, 1, 1}).reshape({2, 2}), b = tensor({1, 0});
  expect_near(cosine_similarity(a, b), {1, 1 / std::sqrt(2.0)}, 1e-6);
  EXPECT_EQ(cosine_similarity(zeros({2, 1, 3}), zeros({4, 3}), -1).shape(), (Shape{2, 4}));
  expect_near(cosine_similarity(zeros({3}), tensor({1, 2, 3}), 0), {0});  // a zero side gives 0, not NaN
  EXPECT_GRADCHECK([](auto& v) { return normalize(v[0], 3.0, 0); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return cosine_similarity(v[0], v[1], -1); }, {leaf({2, 3, 4}), leaf({3, 1})});
}

TEST_F(ReductionOps, NormalizeCosineParity) {
  Fixture f = Fixture::load("everyday_normalize_cosine.txt");
  Tensor x = fixture_leaf(f, "x"), a = fixture_leaf(f, "a"), b = fixture_leaf(f, "b");
  Tensor out_normalize = normalize(x), out_normalize1 = normalize(x, 1.0, 0, 0.5);
  Tensor out_cosine = cosine_similarity(a, b, -1);
  EXPECT_MATCHES_FIXTURE(f, "out_normalize", out_normalize);
  EXPECT_MATCHES_FIXTURE(f, "out_normalize1", out_normalize1);
  EXPECT_MATCHES_FIXTURE(f, "out_cosine", out_cosine);
  (sum(out_normalize * f.get("w_norm")) + sum(out_normalize1 * f.get("w_norm1")) + sum(out_cosine * f.get("w_cos")))
      .backward();
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_a", a.grad());  // the row whose norm is below eps: PyTorch 2's gradient
  EXPECT_MATCHES_FIXTURE(f, "grad_b", b.grad());
}

TEST_F(ReductionOps, NormalizeCosineErrors) {
  expect_error([] { normalize(zeros({2}, kInt64), 2.0, 0); }, "[normalize] expects a floating point tensor, got int64");
  expect_error([] { cosine_similarity(zeros({2}, kInt64), zeros({2}, kInt64), 0); },
               "[cosine_similarity] expects floating point tensors, got int64 of shape [2] and int64 of shape [2]");
  expect_error([] { cosine_similarity(zeros({2, 3}), zeros({4}), 1); },
               "[cosine_similarity] shapes [2, 3] and [4] cannot be broadcast together");
  expect_error([] { cosine_similarity(zeros({2, 3}), zeros({2, 3}), 2); }, "dim 2 is out of range");
  expect_error([] { cosine_similarity(zeros({2}), Tensor(), 0); }, "[cosine_similarity] x2 is an undefined tensor");
}

// --- cumsum ---

TEST_F(ReductionOps, CumsumValuesAndDtypes) {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  expect_near(cumsum(x, 1), {1, 3, 6, 4, 9, 15});
  expect_near(cumsum(x, 0), {1, 2, 3, 5, 7, 9});
  EXPECT_EQ(cumsum(x, 0).dtype(), kFloat32);
  expect_near(cumsum(x.t(), 1), values(cumsum(x, 0).t().contiguous()));  // a transposed view
  // Integers add up in int64, uint8 too (200 + 100 does not wrap).
  const Tensor bytes = cumsum(tensor({200, 100, 50}, kUInt8), 0);
  EXPECT_EQ(bytes.dtype(), kInt64);
  EXPECT_EQ(ints(bytes), (std::vector<int64_t>{200, 300, 350}));
  EXPECT_EQ(cumsum(scalar_tensor(4.0), 0).item<double>(), 4.0);
  // float32 sums run in double: 1e8 + 1 + ... keeps every 1 (a float32 running sum would not).
  const Tensor big = cumsum(tensor({1e8, 1, 1, 1, 1, 1, 1, 1, 1}), 0);
  EXPECT_EQ(values(big).back(), static_cast<double>(static_cast<float>(1e8 + 8)));
  expect_error([] { cumsum(zeros({2}), 1); }, "[cumsum] dim 1 is out of range for a tensor with 1 dim(s)");
}

TEST_F(ReductionOps, CumsumGradientIsAReverseCumsum) {
  const Tensor x = tensor({1, 2, 3}, kFloat64).requires_grad_();
  sum(cumsum(x, 0) * tensor({1, 10, 100}, kFloat64)).backward();
  expect_near(x.grad(), {111, 110, 100});
  EXPECT_GRADCHECK([](auto& v) { return cumsum(v[0], 1); }, {leaf({3, 4, 2})});
  EXPECT_GRADCHECK([](auto& v) { return cumsum(v[0], -1); }, {leaf({2, 5})});
  EXPECT_GRADCHECK([](auto& v) { return cumsum(v[0], 0); }, {leaf({4})});
}

void check_cumsum_parity(const std::string& file) {
  Fixture f = Fixture::load(file);
  Tensor x = fixture_leaf(f, "x");
  Tensor out1 = cumsum(x, 1), out_last = cumsum(x, -1);
  (sum(out1 * f.get("w1")) + sum(out_last * f.get("w_last"))).backward();
  EXPECT_MATCHES_FIXTURE(f, "out1", out1);
  EXPECT_MATCHES_FIXTURE(f, "out_last", out_last);
  EXPECT_MATCHES_FIXTURE(f, "out_ints", cumsum(f.get("ints"), 1));
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
}
TEST_F(ReductionOps, CumsumParity) { check_cumsum_parity("parity_cumsum.txt"); }
TEST_F(ReductionOps, CumsumParityFloat64) { check_cumsum_parity("parity_cumsum_f64.txt"); }

// --- sort, argsort, topk ---

TEST_F(ReductionOps, SortOrdersNaNLastAndKeepsTiesInPlace) {
  const Tensor x = tensor({3, kNaN, 1, 3, kNaN, -kInf});
  auto [up, up_at] = sort(x);
  expect_same_values(up, {-kInf, 1, 3, 3, kNaN, kNaN});
  EXPECT_EQ(ints(up_at), (std::vector<int64_t>{5, 2, 0, 3, 1, 4}));
  EXPECT_EQ(up_at.dtype(), kInt64);
  auto [down, down_at] = sort(x, 0, true);
  expect_same_values(down, {kNaN, kNaN, 3, 3, 1, -kInf});
  EXPECT_EQ(ints(down_at), (std::vector<int64_t>{1, 4, 0, 3, 2, 5}));
  EXPECT_EQ(ints(argsort(x, -1, true)), ints(down_at));
  // -0.0 and 0.0 are equal: they keep their order.
  EXPECT_EQ(ints(argsort(tensor({0.0, -0.0, 0.0, -1.0}))), (std::vector<int64_t>{3, 0, 1, 2}));
}

TEST_F(ReductionOps, SortAlongAnyDimAndDtype) {
  const Tensor x = tensor({5, 1, 4, 2, 2, 9}).reshape({2, 3});
  auto [rows, rows_at] = sort(x, 1);
  expect_near(rows, {1, 4, 5, 2, 2, 9});
  EXPECT_EQ(ints(rows_at), (std::vector<int64_t>{1, 2, 0, 0, 1, 2}));
  auto [cols, cols_at] = sort(x, 0, true);
  expect_near(cols, {5, 2, 9, 2, 1, 4});
  EXPECT_EQ(ints(cols_at), (std::vector<int64_t>{0, 1, 1, 1, 0, 0}));
  // A transposed view sorts as its contiguous copy does.
  auto [view_sorted, view_at] = sort(x.t(), 1, true);
  expect_near(view_sorted, values(cols.t().contiguous()));
  EXPECT_EQ(ints(view_at), ints(cols_at.t().contiguous()));
  // Integers sort in their own dtype; the values keep it.
  auto [i64, i64_at] = sort(from_vector(std::vector<int64_t>{7, -3, 7, 0}, {4}, kInt64));
  EXPECT_EQ(i64.dtype(), kInt64);
  EXPECT_EQ(ints(i64), (std::vector<int64_t>{-3, 0, 7, 7}));
  EXPECT_EQ(ints(i64_at), (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(ints(argsort(tensor({200, 3, 100}, kUInt8))), (std::vector<int64_t>{1, 2, 0}));
  // A 0-d tensor is its only element; an empty dim gives empty results.
  auto [scalar, scalar_at] = sort(scalar_tensor(2.5));
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<double>(), 2.5);
  EXPECT_EQ(scalar_at.item<int64_t>(), 0);
  EXPECT_EQ(sort(zeros({3, 0}), 1).values.shape(), (Shape{3, 0}));
}

TEST_F(ReductionOps, TopkPicksTheLargestOrSmallest) {
  const Tensor x = tensor({1, 8, 3, 8, -2, 5}).reshape({2, 3});
  auto [top, top_at] = topk(x, 2);
  expect_near(top, {8, 3, 8, 5});
  EXPECT_EQ(ints(top_at), (std::vector<int64_t>{1, 2, 0, 2}));
  auto [low, low_at] = topk(x, 1, 0, false);
  expect_near(low, {1, -2, 3});
  EXPECT_EQ(ints(low_at), (std::vector<int64_t>{0, 1, 0}));
  // Ties go to the lower position; NaN is the largest.
  auto [nan_top, nan_at] = topk(tensor({3, kNaN, 1, 3}), 2);
  expect_same_values(nan_top, {kNaN, 3});
  EXPECT_EQ(ints(nan_at), (std::vector<int64_t>{1, 0}));
  // sorted = false: the same elements, in the order of their positions.
  auto [unsorted, unsorted_at] = topk(tensor({4, 9, 1, 7, 8}), 3, -1, true, false);
  expect_near(unsorted, {9, 7, 8});
  EXPECT_EQ(ints(unsorted_at), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(topk(x, 0).values.shape(), (Shape{2, 0}));
}

TEST_F(ReductionOps, SortGradientGoesBackToThePickedPositions) {
  const Tensor x = tensor({1, 5, 3, 4}, kFloat64).requires_grad_();
  auto [top, at] = topk(x, 2);
  sum(top * tensor({10, 1}, kFloat64)).backward();
  expect_near(x.grad(), {0, 10, 0, 1});
  EXPECT_FALSE(at.requires_grad());
  EXPECT_GRADCHECK([](auto& v) { return sort(v[0], 1).values; }, {leaf({3, 5})});
  EXPECT_GRADCHECK([](auto& v) { return sort(v[0], 0, true).values; }, {leaf({4, 2, 3})});
  EXPECT_GRADCHECK([](auto& v) { return topk(v[0], 2, 1).values; }, {leaf({3, 5, 2})});
  EXPECT_GRADCHECK([](auto& v) { return topk(v[0], 3, -1, false, false).values; }, {leaf({2, 6})});
}

TEST_F(ReductionOps, SortTopkParity) {
  Fixture f = Fixture::load("parity_sort_topk.txt");
  Tensor ties = fixture_leaf(f, "ties"), x = fixture_leaf(f, "x");
  const std::vector<std::pair<std::string, ValuesAndIndices>> results = {
      {"sort1", sort(ties, 1)},
      {"sort0_desc", sort(ties, 0, true)},
      {"top3", topk(x, 3)},
      {"bottom2_dim0", topk(x, 2, 0, false)},
      {"top4_unsorted", topk(x, 4, -1, true, false)},
  };
  Tensor loss = zeros({});
  for (const auto& [name, r] : results) {
    EXPECT_MATCHES_FIXTURE(f, "out_" + name + "_values", r.values);
    EXPECT_MATCHES_FIXTURE(f, "out_" + name + "_indices", r.indices);
    loss = loss + sum(r.values * f.get("w_" + name));
  }
  EXPECT_MATCHES_FIXTURE(f, "out_argsort_desc", argsort(f.get("ties"), 1, true));
  loss.backward();
  EXPECT_MATCHES_FIXTURE(f, "grad_ties", ties.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
}

TEST_F(ReductionOps, SortErrors) {
  expect_error([] { sort(zeros({2, 3}), 2); }, "[sort] dim 2 is out of range for a tensor with 2 dim(s)");
  expect_error([] { argsort(zeros({2}), -2); }, "[argsort] dim -2 is out of range");
  expect_error([] { topk(zeros({2, 3}), 4); }, "[topk] k = 4 is out of range for dim 1 of size 3 (input shape [2, 3])");
  expect_error([] { topk(zeros({2, 3}), -1, 0); }, "[topk] k = -1 is out of range for dim 0 of size 2");
  expect_error([] { sort(Tensor()); }, "[sort] input is an undefined tensor");
}

// --- errors ---

TEST_F(ReductionOps, BadInputThrowsNamingTheOpAndShapes) {
  expect_error([] { sum(zeros({2, 3}), {2}); }, "[sum] dim 2 is out of range for a tensor with 2 dim(s)");
  expect_error([] { sum(zeros({2, 3}), {1, -1}); }, "[sum] dim [1, -1] names a dim more than once");
  expect_error([] { softmax(zeros({2, 3}), 3); }, "[softmax] dim 3 is out of range");
  expect_error([] { softmax(zeros({2}, kInt64), 0); }, "[softmax] expects a floating point tensor, got int64");
  expect_error([] { max(zeros({0})); }, "[max] cannot reduce an empty tensor of shape [0]");
}
