// The everyday tensor ops: sort, argsort, topk, cumsum, pad, clamp (tensor bounds, one-sided),
// einsum, vector_norm, normalize, cosine_similarity, tanh gelu, embedding's padding_idx and int64
// arange. For each: values worked out by hand, gradcheck (float64 central differences), PyTorch
// parity of forward and gradients (fixtures from tests/fixtures/make_fixtures.py, and from
// make_everyday_fixtures.py for the ops PyTorch 2 computes differently) and the errors for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
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
using testutil::expect_error;
using testutil::expect_near;
using testutil::Fixture;
using testutil::leaf;
using testutil::values;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

testutil::Tol tol_for(const Tensor& t) { return t.dtype() == kFloat64 ? testutil::kFloat64Tol : testutil::kFloat32Tol; }

#define EXPECT_MATCHES(f, name, got) EXPECT_TRUE(testutil::all_close(name, got, (f).get(name), tol_for(got)))

Tensor fixture_leaf(const Fixture& f, const std::string& name) { return f.get(name).requires_grad_(); }

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// NaN-aware comparison of a tensor's elements with expected values.
void expect_same_values(const Tensor& t, const std::vector<double>& expected) {
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

class EverydayOps : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(12); }
};

}  // namespace

// --- sort, argsort, topk ---

TEST_F(EverydayOps, SortOrdersNaNLastAndKeepsTiesInPlace) {
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

TEST_F(EverydayOps, SortAlongAnyDimAndDtype) {
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

TEST_F(EverydayOps, TopkPicksTheLargestOrSmallest) {
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

TEST_F(EverydayOps, SortGradientGoesBackToThePickedPositions) {
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

TEST_F(EverydayOps, SortTopkParity) {
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
    EXPECT_MATCHES(f, "out_" + name + "_values", r.values);
    EXPECT_MATCHES(f, "out_" + name + "_indices", r.indices);
    loss = loss + sum(r.values * f.get("w_" + name));
  }
  EXPECT_MATCHES(f, "out_argsort_desc", argsort(f.get("ties"), 1, true));
  loss.backward();
  EXPECT_MATCHES(f, "grad_ties", ties.grad());
  EXPECT_MATCHES(f, "grad_x", x.grad());
}

TEST_F(EverydayOps, SortErrors) {
  expect_error([] { sort(zeros({2, 3}), 2); }, "[sort] dim 2 is out of range for a tensor with 2 dim(s)");
  expect_error([] { argsort(zeros({2}), -2); }, "[argsort] dim -2 is out of range");
  expect_error([] { topk(zeros({2, 3}), 4); }, "[topk] k = 4 is out of range for dim 1 of size 3 (input shape [2, 3])");
  expect_error([] { topk(zeros({2, 3}), -1, 0); }, "[topk] k = -1 is out of range for dim 0 of size 2");
  expect_error([] { sort(Tensor()); }, "[sort] input is an undefined tensor");
}

// --- cumsum ---

TEST_F(EverydayOps, CumsumValuesAndDtypes) {
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

TEST_F(EverydayOps, CumsumGradientIsAReverseCumsum) {
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
  EXPECT_MATCHES(f, "out1", out1);
  EXPECT_MATCHES(f, "out_last", out_last);
  EXPECT_MATCHES(f, "out_ints", cumsum(f.get("ints"), 1));
  EXPECT_MATCHES(f, "grad_x", x.grad());
}
TEST_F(EverydayOps, CumsumParity) { check_cumsum_parity("parity_cumsum.txt"); }
TEST_F(EverydayOps, CumsumParityFloat64) { check_cumsum_parity("parity_cumsum_f64.txt"); }

// --- pad ---

TEST_F(EverydayOps, PadModesByHand) {
  const Tensor x = arange(4.0);  // 0 1 2 3
  expect_near(pad(x, {2, 1}, PadMode::Constant, 9.0), {9, 9, 0, 1, 2, 3, 9});
  expect_near(pad(x, {-1, 1}), {1, 2, 3, 0});  // a negative amount crops
  expect_near(pad(x, {3, 1}, PadMode::Reflect), {3, 2, 1, 0, 1, 2, 3, 2});
  expect_near(pad(x, {2, 2}, PadMode::Replicate), {0, 0, 0, 1, 2, 3, 3, 3});
  expect_near(pad(x, {4, 2}, PadMode::Circular), {0, 1, 2, 3, 0, 1, 2, 3, 0, 1});
  // Negative amounts: reflect and replicate measure from the input's edges, circular wraps what is left.
  expect_near(pad(x, {3, -2}, PadMode::Reflect), {3, 2, 1, 0, 1});
  expect_near(pad(x, {2, -4}, PadMode::Replicate), {0, 0});
  expect_near(pad(x, {3, -1}, PadMode::Circular), {0, 1, 2, 0, 1, 2});
  // Pairs go from the last dim backwards: {left, right, top, bottom}.
  const Tensor m = arange(6.0).reshape({2, 3});
  const Tensor padded = pad(m, {1, 0, 0, 1});
  EXPECT_EQ(padded.shape(), (Shape{3, 4}));
  expect_near(padded, {0, 0, 1, 2, 0, 3, 4, 5, 0, 0, 0, 0});
  expect_near(pad(m, {0, 0, 1, 1}, PadMode::Reflect), {3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2});
  // Integer tensors keep their dtype.
  EXPECT_EQ(pad(zeros({2}, kInt64), {1, 1}, PadMode::Constant, 7.0).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 0, 0, 7}));
}

TEST_F(EverydayOps, PadGradcheck) {
  EXPECT_GRADCHECK([](auto& v) { return pad(v[0], {1, 2, -1, 1}, PadMode::Constant, 0.5); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return pad(v[0], {2, 3, 1, 1}, PadMode::Reflect); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return pad(v[0], {3, 0, 0, 2}, PadMode::Replicate); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return pad(v[0], {4, 2, 1, -1}, PadMode::Circular); }, {leaf({2, 3, 4})});
}

TEST_F(EverydayOps, PadParity) {
  Fixture f = Fixture::load("parity_pad.txt");
  Tensor x4 = fixture_leaf(f, "x4"), x3 = fixture_leaf(f, "x3");
  struct Variant {
    const char* name;
    Shape pads;
    PadMode mode;
    double value;
    const Tensor& input;
  };
  const std::vector<Variant> variants = {
      {"constant", {1, 2}, PadMode::Constant, 0.5, x4},
      {"constant_crop", {-1, 2, 1, -1}, PadMode::Constant, -2.0, x4},
      {"constant_3d", {0, 1, 2, 0, 1, 1}, PadMode::Constant, 0.0, x4},
      {"reflect", {2, 3, 1, 1}, PadMode::Reflect, 0.0, x4},
      {"reflect_1d", {3, 1}, PadMode::Reflect, 0.0, x3},
      {"reflect_crop", {3, -2}, PadMode::Reflect, 0.0, x3},
      {"replicate", {3, 0, 0, 2}, PadMode::Replicate, 0.0, x4},
      {"replicate_crop", {-1, 2}, PadMode::Replicate, 0.0, x3},
      {"circular", {2, 4, 1, 0}, PadMode::Circular, 0.0, x4},
      {"circular_crop", {3, -1}, PadMode::Circular, 0.0, x3},
  };
  Tensor loss = zeros({});
  for (const Variant& v : variants) {
    Tensor out = pad(v.input, v.pads, v.mode, v.value);
    EXPECT_MATCHES(f, std::string("out_") + v.name, out);
    loss = loss + sum(out * f.get(std::string("w_") + v.name));
  }
  loss.backward();
  EXPECT_MATCHES(f, "grad_x4", x4.grad());
  EXPECT_MATCHES(f, "grad_x3", x3.grad());
}

TEST_F(EverydayOps, PadErrors) {
  const Tensor x = zeros({2, 4});
  expect_error([&] { pad(x, {1, 2, 3}); }, "[pad] pads [1, 2, 3] must come in (before, after) pairs");
  expect_error([&] { pad(x, {1, 1, 1, 1, 1, 1}); }, "[pad] pads [1, 1, 1, 1, 1, 1] name 3 dims but the input of shape [2, 4] has 2");
  expect_error([&] { pad(x, {4, 0}, PadMode::Reflect); },
               "[pad] reflect padding (4, 0) of dim 1 (size 4) must be smaller than the size of the dim (input shape [2, 4])");
  expect_error([&] { pad(x, {0, 0, 0, 2}, PadMode::Reflect); }, "[pad] reflect padding (0, 2) of dim 0 (size 2)");
  expect_error([&] { pad(x, {5, 0}, PadMode::Circular); }, "[pad] circular padding (5, 0) of dim 1 (size 4) wraps around more than once");
  expect_error([&] { pad(x, {3, -2}, PadMode::Circular); }, "[pad] circular padding (3, -2) of dim 1 (size 4) wraps around");
  expect_error([&] { pad(x, {-3, -2}); }, "[pad] constant padding (-3, -2) of dim 1 (size 4) would leave a negative size");
  expect_error([] { pad(zeros({2, 0}), {1, 0}, PadMode::Replicate); }, "has no element to repeat");
  expect_error([&] { pad(x, {1, 1}, PadMode::Reflect, 2.0); }, "[pad] value 2 is only used by constant mode, got reflect mode");
}

// --- clamp with tensor bounds ---

TEST_F(EverydayOps, ClampTensorsValuesAndTies) {
  // Ties go to x; min > max gives max, whose gradient it is.
  const Tensor x = tensor({1, 2, 3, 4}).requires_grad_();
  const Tensor lo = tensor({2, 2, 5, 0}).requires_grad_(), hi = tensor({3, 2, 4, 4}).requires_grad_();
  Tensor y = clamp(x, lo, hi);
  expect_near(y, {2, 2, 4, 4});
  sum(y).backward();
  expect_near(x.grad(), {0, 1, 0, 1});
  expect_near(lo.grad(), {1, 0, 0, 0});
  expect_near(hi.grad(), {0, 0, 1, 0});
  // One bound only, broadcasting.
  const Tensor m = tensor({-1, 0.5, 3, 7}).reshape({2, 2});
  expect_near(clamp(m, tensor({0, 1}), Tensor()), {0, 1, 3, 7});
  expect_near(clamp(m, Tensor(), tensor({2}).reshape({1, 1})), {-1, 0.5, 2, 2});
  // NaN anywhere gives NaN.
  expect_same_values(clamp(tensor({kNaN, 1, 1}), tensor({0, kNaN, 0}), tensor({1, 2, kNaN})), {kNaN, kNaN, kNaN});
  // Integer operands stay integers; a float bound promotes.
  const Tensor i = from_vector(std::vector<int64_t>{1, 5, 9}, {3}, kInt64);
  const Tensor i_lo = from_vector(std::vector<int64_t>{2, 2, 2}, {3}, kInt64);
  EXPECT_EQ(clamp(i, i_lo, from_vector(std::vector<int64_t>{6, 6, 6}, {3}, kInt64)).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 5, 6}));
  EXPECT_EQ(clamp(i, tensor({2.5}), Tensor()).dtype(), kFloat32);
}

TEST_F(EverydayOps, ClampTensorsGradcheck) {
  EXPECT_GRADCHECK([](auto& v) { return clamp(v[0], v[1], v[2]); }, {leaf({3, 4}), leaf({3, 1}, -2, 0), leaf({4}, 0, 2)});
  EXPECT_GRADCHECK([](auto& v) { return clamp(v[0], v[1], Tensor()); }, {leaf({3, 4}), leaf({4})});
  EXPECT_GRADCHECK([](auto& v) { return clamp(v[0], Tensor(), v[1]); }, {leaf({2, 3}), leaf({})});
}

TEST_F(EverydayOps, ClampTensorsParity) {
  Fixture f = Fixture::load("parity_clamp_tensors.txt");
  Tensor x = fixture_leaf(f, "x"), lo = fixture_leaf(f, "lo"), hi = fixture_leaf(f, "hi");
  Tensor lo_only = fixture_leaf(f, "lo_only"), hi_only = fixture_leaf(f, "hi_only");
  Tensor out_both = clamp(x, lo, hi), out_min = clamp(x, lo_only, Tensor()), out_max = clamp(x, Tensor(), hi_only);
  EXPECT_MATCHES(f, "out_both", out_both);
  EXPECT_MATCHES(f, "out_min", out_min);
  EXPECT_MATCHES(f, "out_max", out_max);
  (sum(out_both * f.get("w_both")) + sum(out_min * f.get("w_min")) + sum(out_max * f.get("w_max"))).backward();
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_lo", lo.grad());
  EXPECT_MATCHES(f, "grad_hi", hi.grad());
  EXPECT_MATCHES(f, "grad_lo_only", lo_only.grad());
  EXPECT_MATCHES(f, "grad_hi_only", hi_only.grad());
}

TEST_F(EverydayOps, ClampTensorsErrors) {
  expect_error([] { clamp(zeros({2}), Tensor(), Tensor()); },
               "[clamp] needs a min or a max tensor, both are undefined (input shape [2])");
  expect_error([] { clamp(zeros({2, 3}), zeros({2}), Tensor()); },
               "[clamp] shapes [2, 3] and [2] cannot be broadcast together");
  expect_error([] { clamp(zeros({2}), Tensor(), zeros({3})); }, "[clamp] shapes [2] and [3] cannot be broadcast");
}

// --- einsum ---

TEST_F(EverydayOps, EinsumByHand) {
  const Tensor a = arange(6.0).reshape({2, 3}), b = arange(12.0).reshape({3, 4});
  EXPECT_TRUE(testutil::all_close("matmul", einsum("ij,jk->ik", {a, b}), matmul(a, b), testutil::kFloat32Tol));
  EXPECT_TRUE(testutil::all_close("implicit", einsum("ij,jk", {a, b}), matmul(a, b), testutil::kFloat32Tol));
  expect_near(einsum("ij->ji", {a}), values(a.t().contiguous()));
  expect_near(einsum("ij", {a}), values(a));              // implicit: sorted letters, i before j
  expect_near(einsum("ba", {a}), values(a.t().contiguous()));  // ... so "ba" transposes
  const Tensor sq = arange(9.0).reshape({3, 3});
  expect_near(einsum("ii", {sq}), {12});
  expect_near(einsum("ii->i", {sq}), {0, 4, 8});
  expect_near(einsum("i j -> j", {a}), {3, 5, 7});  // spaces are ignored
  expect_near(einsum("i,i", {tensor({1, 2, 3}), tensor({4, 5, 6})}), {32});
  EXPECT_EQ(einsum("i,j", {zeros({2}), zeros({3})}).shape(), (Shape{2, 3}));
  EXPECT_EQ(einsum("...ij,...jk", {zeros({5, 2, 3}), zeros({3, 4})}).shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(einsum("i...->...", {zeros({2, 3, 4})}).shape(), (Shape{3, 4}));
  EXPECT_EQ(einsum("bA,Ab", {zeros({2, 3}), zeros({3, 2})}).shape(), (Shape{}));
  // A size-1 dim broadcasts: j is 1 in the first operand and 3 in the second.
  expect_near(einsum("ij,j->i", {ones({2, 1}), ones({3})}), {3, 3});
}

TEST_F(EverydayOps, EinsumGradcheck) {
  EXPECT_GRADCHECK([](auto& v) { return einsum("bij,bjk->bik", {v[0], v[1]}); }, {leaf({2, 3, 4}), leaf({2, 4, 2})});
  EXPECT_GRADCHECK([](auto& v) { return einsum("bn,anm,bm->ba", {v[0], v[1], v[2]}); },
                   {leaf({2, 3}), leaf({2, 3, 4}), leaf({2, 4})});
  EXPECT_GRADCHECK([](auto& v) { return einsum("...ii->...i", {v[0]}); }, {leaf({2, 3, 3})});
  EXPECT_GRADCHECK([](auto& v) { return einsum("iij,jk->ik", {v[0], v[1]}); }, {leaf({3, 3, 2}), leaf({2, 4})});
  EXPECT_GRADCHECK([](auto& v) { return einsum("ij,ij->i", {v[0], v[1]}); }, {leaf({3, 4}), leaf({1, 4})});
}

TEST_F(EverydayOps, EinsumParity) {
  Fixture f = Fixture::load("parity_einsum.txt");
  // The names and equations of EINSUM_VARIANTS in tests/fixtures/make_fixtures.py.
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"matmul", "ij,jk->ik"},
      {"bmm", "bij,bjk->bik"},
      {"outer", "i,j->ij"},
      {"dot", "i,i->"},
      {"transposed", "ij,kj->ik"},
      {"implicit", "bij,bkj"},
      {"sum_one_side", "ijk,j->i"},
      {"bilinear", "bn,anm,bm->ba"},
      {"ellipsis", "...ij,...jk->...ik"},
      {"broadcast_one", "ij,j->i"},
      {"upper", "Ab,bA"},
      {"permute", "ijk->kij"},
      {"trace", "ii"},
      {"diagonal", "ii->i"},
      {"batch_diag", "...ii->...i"},
      {"sum_all", "ij->"},
      {"sum_rows", "ij->j"},
  };
  for (const auto& [name, equation] : variants) {
    SCOPED_TRACE(name + " '" + equation + "'");
    std::vector<Tensor> inputs;
    for (int i = 0; f.has(name + "_in" + std::to_string(i)); ++i)
      inputs.push_back(fixture_leaf(f, name + "_in" + std::to_string(i)));
    ASSERT_FALSE(inputs.empty());
    Tensor out = einsum(equation, inputs);
    EXPECT_MATCHES(f, "out_" + name, out);
    sum(out * f.get("w_" + name)).backward();
    for (size_t i = 0; i < inputs.size(); ++i)
      EXPECT_MATCHES(f, "grad_" + name + "_in" + std::to_string(i), inputs[i].grad());
  }
}

TEST_F(EverydayOps, EinsumErrors) {
  const Tensor a = zeros({2, 3}), b = zeros({4, 5});
  expect_error([&] { einsum("ij,jk->ik", {a, b}); },
               "[einsum] subscript j has size 3 in operand 0 but size 4 in operand 1 of shape [4, 5] (equation 'ij,jk->ik')");
  expect_error([&] { einsum("ij,jk", {a}); }, "[einsum] equation 'ij,jk' has subscripts for 2 operand(s) but 1 were given");
  expect_error([&] { einsum("i$", {a}); }, "[einsum] invalid character '$' at position 1 of equation 'i$'");
  expect_error([&] { einsum("ijk", {a}); }, "[einsum] operand 0 of shape [2, 3] has 2 dims but its subscripts name 3");
  expect_error([&] { einsum("ijk...", {a}); }, "has 2 dims but its subscripts name 3 and an ellipsis");
  expect_error([&] { einsum("ij->k", {a}); }, "[einsum] output subscript k names no operand's dim in equation 'ij->k'");
  expect_error([&] { einsum("ij->ii", {a}); }, "[einsum] output subscript i appears more than once");
  expect_error([&] { einsum("ii", {a}); }, "[einsum] subscript i is repeated in operand 0 of shape [2, 3] with sizes 2 and 3");
  expect_error([&] { einsum("i..j", {a}); }, "[einsum] '.' at position 1 of equation 'i..j' is not part of an ellipsis");
  expect_error([&] { einsum("...i...", {a}); }, "[einsum] more than one ellipsis");
  expect_error([&] { einsum("i->i->i", {zeros({2})}); }, "has more than one '->'");
  expect_error([] { einsum("i", {}); }, "[einsum] needs at least one operand");
  expect_error([] { einsum("i", {zeros({2}, kInt64)}); }, "[einsum] expects a floating point tensor, got int64");
}

// --- one-sided clamps, tanh gelu, embedding's padding row, int64 arange ---

TEST_F(EverydayOps, OneSidedClampsByHand) {
  const Tensor x = tensor({-2, -0.5, 0, 0.5, 2}).requires_grad_();
  expect_near(clamp_min(x, 0.0), {0, 0, 0, 0.5, 2});
  expect_near(clamp_max(x, 0.0), {-2, -0.5, 0, 0, 0});
  expect_near(clamp(x, -0.5, std::nullopt), {-0.5, -0.5, 0, 0.5, 2});
  expect_near(clamp(x, std::nullopt, 0.5), {-2, -0.5, 0, 0.5, 0.5});
  sum(clamp(x, -0.5, std::nullopt)).backward();
  // The bound itself passes the gradient, as the two-sided clamp's always has and PyTorch 1.13's
  // does; PyTorch 2 gives 0 there.
  expect_near(x.grad(), {0, 1, 1, 1, 1});
  expect_same_values(clamp_min(tensor({kNaN, -kInf}), 0.0), {kNaN, 0});
  EXPECT_GRADCHECK([](auto& v) { return clamp_max(v[0], 0.3); }, {leaf({3, 4})});
}

TEST_F(EverydayOps, OneSidedClampErrors) {
  expect_error([] { clamp(zeros({2}), std::nullopt, std::nullopt); },
               "[clamp] needs a min or a max, both are missing (input shape [2])");
  expect_error([] { clamp(zeros({2}), 1.0, 0.0); }, "[clamp] min (1) must not exceed max (0)");
  expect_error([] { clamp_min(zeros({2}, kInt64), 0.0); }, "[clamp_min] expects a floating point tensor, got int64");
  expect_error([] { clamp_max(Tensor(), 0.0); }, "[clamp_max] input is an undefined tensor");
}

TEST_F(EverydayOps, TanhGeluIsTheApproximation) {
  const Tensor x = tensor({-3, -1, 0, 0.5, 2});
  const double c = std::sqrt(2.0 / std::numbers::pi);
  std::vector<double> want;
  for (double v : values(x)) want.push_back(0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v))));
  expect_near(gelu(x, GeluApproximate::Tanh), want, 1e-6);
  // Not the exact form: they differ by up to about 1e-3.
  EXPECT_GT(max(abs(gelu(x, GeluApproximate::Tanh) - gelu(x))).item(), 1e-4);
  EXPECT_EQ(gelu(x.to(kBFloat16), GeluApproximate::Tanh).dtype(), kBFloat16);
  EXPECT_GRADCHECK([](auto& v) { return gelu(v[0], GeluApproximate::Tanh); }, {leaf({2, 5}, -4, 4)});
}

TEST_F(EverydayOps, ClampGeluEmbeddingParity) {
  Fixture f = Fixture::load("everyday_clamp_gelu_embedding.txt");
  Tensor x = fixture_leaf(f, "x"), weight = fixture_leaf(f, "weight");
  Tensor out_min = clamp_min(x, 0.5), out_max = clamp(x, std::nullopt, -0.5);
  Tensor out_gelu = gelu(x, GeluApproximate::Tanh), out_emb = embedding(weight, f.get("ids"), -1);
  EXPECT_MATCHES(f, "out_min", out_min);
  EXPECT_MATCHES(f, "out_max", out_max);
  EXPECT_MATCHES(f, "out_gelu", out_gelu);
  EXPECT_MATCHES(f, "out_emb", out_emb);
  (sum(out_min * f.get("w_min")) + sum(out_max * f.get("w_max")) + sum(out_gelu * f.get("w_gelu")) +
   sum(out_emb * f.get("w_emb")))
      .backward();
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_weight", weight.grad());
}

TEST_F(EverydayOps, EmbeddingPaddingRowGetsNoGradient) {
  const Tensor weight = leaf({4, 2});
  const Tensor ids = from_vector(std::vector<int64_t>{1, 3, 1, 0}, {4}, kInt64);
  sum(embedding(weight, ids, 1) * 2.0).backward();
  expect_near(weight.grad(), {2, 2, 0, 0, 0, 0, 2, 2});  // row 1 looked up twice, no gradient
  // Row 2 is never looked up, so its zero gradient is also the true one (a looked-up padding row's
  // is not: PyTorch and ember leave it out on purpose).
  EXPECT_GRADCHECK([&](auto& v) { return embedding(v[0], ids, -2); }, {leaf({4, 3})});
  expect_error([&] { embedding(weight, ids, 4); },
               "[embedding] padding_idx 4 is out of range for a table of 4 embeddings (weight shape [4, 2])");
  expect_error([&] { embedding(weight, ids, -5); }, "[embedding] padding_idx -5 is out of range");
}

TEST_F(EverydayOps, ArangeOfInt64IsExact) {
  // Position ids as a GPT-2 port makes them: int64, exact.
  const Tensor positions = arange(0, 5, 1, kInt64);
  EXPECT_EQ(positions.dtype(), kInt64);
  EXPECT_EQ(ints(positions), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ints(arange(10, 0, -3, kInt64)), (std::vector<int64_t>{10, 7, 4, 1}));
  const int64_t big = int64_t{1} << 52;
  EXPECT_EQ(ints(arange(static_cast<double>(big), static_cast<double>(big + 3), 1, kInt64)),
            (std::vector<int64_t>{big, big + 1, big + 2}));
}

// --- vector_norm, normalize, cosine_similarity ---

TEST_F(EverydayOps, VectorNormByHand) {
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

TEST_F(EverydayOps, VectorNormErrors) {
  expect_error([] { vector_norm(zeros({2}, kInt64)); }, "[vector_norm] expects a floating point tensor, got int64");
  expect_error([] { vector_norm(zeros({2}, kFloat64), 2.0, {}, false, kFloat32); },
               "[vector_norm] cannot compute a float64 tensor of shape [2] in float32");
  expect_error([] { vector_norm(zeros({0, 3}), kInf, {0}); },
               "[vector_norm] cannot take the inf norm over dim 0 of a tensor of shape [0, 3]");
  expect_near(vector_norm(zeros({0, 3}), 2.0, {0}), {0, 0, 0});  // an empty sum is 0, as PyTorch's
  expect_error([] { vector_norm(zeros({2, 3}), 2.0, {2}); }, "dim 2 is out of range");
  expect_error([] { vector_norm(zeros({2, 3}), 2.0, {1, -1}); }, "[vector_norm] dim [1, -1] names a dim more than once");
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
    EXPECT_MATCHES(f, "out_" + v.name, out);
    sum(out * f.get("w_" + v.name)).backward();
    EXPECT_MATCHES(f, "grad_" + v.name, x.grad());
  }
}
TEST_F(EverydayOps, VectorNormParity) { check_vector_norm_parity("everyday_vector_norm.txt"); }
TEST_F(EverydayOps, VectorNormParityFloat64) { check_vector_norm_parity("everyday_vector_norm_f64.txt"); }

TEST_F(EverydayOps, NormalizeAndCosineSimilarityByHand) {
  expect_near(normalize(tensor({3, 4, 0, 0}).reshape({2, 2})), {0.6, 0.8, 0, 0});
  expect_near(normalize(tensor({1, -3}), 1.0, 0), {0.25, -0.75});
  const Tensor a = tensor({1, 0, 1, 1}).reshape({2, 2}), b = tensor({1, 0});
  expect_near(cosine_similarity(a, b), {1, 1 / std::sqrt(2.0)}, 1e-6);
  EXPECT_EQ(cosine_similarity(zeros({2, 1, 3}), zeros({4, 3}), -1).shape(), (Shape{2, 4}));
  expect_near(cosine_similarity(zeros({3}), tensor({1, 2, 3}), 0), {0});  // a zero side gives 0, not NaN
  EXPECT_GRADCHECK([](auto& v) { return normalize(v[0], 3.0, 0); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return cosine_similarity(v[0], v[1], -1); }, {leaf({2, 3, 4}), leaf({3, 1})});
}

TEST_F(EverydayOps, NormalizeCosineParity) {
  Fixture f = Fixture::load("everyday_normalize_cosine.txt");
  Tensor x = fixture_leaf(f, "x"), a = fixture_leaf(f, "a"), b = fixture_leaf(f, "b");
  Tensor out_normalize = normalize(x), out_normalize1 = normalize(x, 1.0, 0, 0.5);
  Tensor out_cosine = cosine_similarity(a, b, -1);
  EXPECT_MATCHES(f, "out_normalize", out_normalize);
  EXPECT_MATCHES(f, "out_normalize1", out_normalize1);
  EXPECT_MATCHES(f, "out_cosine", out_cosine);
  (sum(out_normalize * f.get("w_norm")) + sum(out_normalize1 * f.get("w_norm1")) + sum(out_cosine * f.get("w_cos")))
      .backward();
  EXPECT_MATCHES(f, "grad_x", x.grad());
  EXPECT_MATCHES(f, "grad_a", a.grad());  // the row whose norm is below eps: PyTorch 2's gradient
  EXPECT_MATCHES(f, "grad_b", b.grad());
}

TEST_F(EverydayOps, NormalizeCosineErrors) {
  expect_error([] { normalize(zeros({2}, kInt64), 2.0, 0); }, "[normalize] expects a floating point tensor, got int64");
  expect_error([] { cosine_similarity(zeros({2}, kInt64), zeros({2}, kInt64), 0); },
               "[cosine_similarity] expects floating point tensors, got int64 of shape [2] and int64 of shape [2]");
  expect_error([] { cosine_similarity(zeros({2, 3}), zeros({4}), 1); },
               "[cosine_similarity] shapes [2, 3] and [4] cannot be broadcast together");
  expect_error([] { cosine_similarity(zeros({2, 3}), zeros({2, 3}), 2); }, "dim 2 is out of range");
  expect_error([] { cosine_similarity(zeros({2}), Tensor(), 0); }, "[cosine_similarity] x2 is an undefined tensor");
}
