// The ops that index, join and reshape: index_select, gather, cat, stack, the views (reshape,
// permute, narrow, slice, select, expand, squeeze, flatten), chunk and split, pad in every mode,
// tril, triu and causal_mask, int64 arange, and output shapes too large for int64. Values worked
// out by hand, gradcheck of the views (Tensor methods, which the op table has no rows for), PyTorch
// parity of forward and gradients (fixtures from tests/fixtures/make_fixtures.py) and the errors
// for bad input. The op table (tests/op_table.cpp, Note [The op table]) adds the checks every op of
// core/ops.h gets: gradcheck in float64, the float32 and 16-bit columns and integer inputs.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::testutil;

using ShapeOps = SeededTest<42>;

// --- indexing and joining ---

TEST_F(ShapeOps, IndexingAndJoining) {
  Tensor x = arange(12).reshape({3, 4});
  Tensor idx = from_vector(std::vector<int64_t>{2, 0, 2}, {3}, kInt64);
  expect_near(index_select(x, 0, idx), {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  expect_near(index_select(x, 1, idx), {2, 0, 2, 6, 4, 6, 10, 8, 10});
  Tensor g = from_vector(std::vector<int64_t>{3, 0, 1, 1, 2, 2}, {3, 2}, kInt64);
  expect_near(gather(x, 1, g), {3, 0, 5, 5, 10, 10});
  expect_near(cat({tensor({1, 2}), tensor({3})}), {1, 2, 3});
  Tensor c = cat({zeros({2, 2}), ones({2, 1})}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  expect_near(c, {0, 0, 1, 0, 0, 1});
  Tensor s = stack({tensor({1, 2}), tensor({3, 4})}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  expect_near(s, {1, 3, 2, 4});

  EXPECT_GRADCHECK([&](auto& v) { return index_select(v[0], 0, idx); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([&](auto& v) { return index_select(v[0], 1, idx); }, {leaf({2, 4, 3})});
  EXPECT_GRADCHECK([&](auto& v) { return gather(v[0], 1, g); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return cat({v[0], v[1] * 2.0}, 1); }, {leaf({2, 3}), leaf({2, 2})});
  EXPECT_GRADCHECK([](auto& v) { return stack({v[0], v[1]}, 0); }, {leaf({2, 3}), leaf({2, 3})});
}

// --- views ---

TEST_F(ShapeOps, ViewGradcheck) {
  EXPECT_GRADCHECK([](auto& x) { return x[0].reshape({4, 3}) * 2.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].t().reshape({12}); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].permute({2, 0, 1}) * 1.0; }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].narrow(1, 1, 2) * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].slice(1, 0, 4, 2) * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].select(0, 1) * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].expand({3, 2, 4}) * 1.0; }, {leaf({2, 1})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].unsqueeze(1).squeeze() * 1.0; }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].flatten() * 1.0; }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].t().contiguous(); }, {leaf({3, 4})});
  EXPECT_GRADCHECK([](auto& x) { return x[0].clone(); }, {leaf({3})});
  // through float32 the finite differences are only good to ~1e-4
  EXPECT_GRADCHECK([](auto& x) { return x[0].to(kFloat32).to(kFloat64); }, {leaf({3})}, 1e-2, 1e-3, 1e-3);
}

// --- chunk, split ---

TEST_F(ShapeOps, ChunkAndSplitReturnViews) {
  const Tensor x = arange(14.0).reshape({7, 2});
  std::vector<Tensor> c = chunk(x, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(c[2].shape(), (Shape{1, 2}));
  expect_near(c[2], {12, 13});
  EXPECT_EQ(c[1].raw_data(), x.narrow(0, 3, 3).raw_data());  // a view, no copy
  EXPECT_EQ(chunk(x, 4).size(), 4u);                         // 2, 2, 2, 1
  EXPECT_EQ(chunk(arange(6.0), 4).size(), 3u);               // 2, 2, 2: fewer than asked, as PyTorch
  std::vector<Tensor> s = split(x, 3);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].shape(), (Shape{1, 2}));
  std::vector<Tensor> cols = split(x, Shape{1, 1}, -1);
  expect_near(cols[1], {1, 3, 5, 7, 9, 11, 13});
  EXPECT_EQ(split(x, Shape{0, 7}, 0)[0].shape(), (Shape{0, 2}));
}

TEST_F(ShapeOps, ChunkAndSplitErrors) {
  expect_error([] { split(zeros({5, 2}), Shape{2, 2}); },
               "[split] sizes [2, 2] add up to 4 but dim 0 of the input of shape [5, 2] has size 5");
  expect_error([] { split(zeros({5}), Shape{6, -1}); }, "[split] sizes [6, -1] must not be negative");
  expect_error([] { split(zeros({5}), 0); }, "[split] split_size must be > 0, got 0");
  expect_error([] { chunk(zeros({5}), 0); }, "[chunk] chunks must be > 0, got 0");
  expect_error([] { chunk(scalar_tensor(1.0), 2); }, "[chunk] cannot chunk a 0-dim tensor");
  expect_error([] { split(zeros({5}), 2, 1); }, "[split] dim 1 is out of range");
}

TEST_F(ShapeOps, ChunkSplitParity) {
  Fixture f = Fixture::load("parity_chunk_split.txt");
  Tensor x = fixture_leaf(f, "x");
  std::vector<Tensor> pieces = chunk(x, 3, 0);
  for (const Tensor& t : split(x, Shape{1, 3}, 1)) pieces.push_back(t);
  const std::vector<std::string> names = {"chunk0", "chunk1", "chunk2", "split0", "split1"};
  ASSERT_EQ(pieces.size(), names.size());
  Tensor loss = zeros({});
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_MATCHES_FIXTURE(f, "out_" + names[i], pieces[i]);
    loss = loss + sum(pieces[i] * f.get("w_" + names[i]));
  }
  loss.backward();
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
}

// --- pad ---

TEST_F(ShapeOps, PadModesByHand) {
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

TEST_F(ShapeOps, PadParity) {
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
    EXPECT_MATCHES_FIXTURE(f, std::string("out_") + v.name, out);
    loss = loss + sum(out * f.get(std::string("w_") + v.name));
  }
  loss.backward();
  EXPECT_MATCHES_FIXTURE(f, "grad_x4", x4.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_x3", x3.grad());
}

TEST_F(ShapeOps, PadErrors) {
  const Tensor x = zeros({2, 4});
  expect_error([&] { pad(x, {1, 2, 3}); }, "[pad] pads [1, 2, 3] must come in (before, after) pairs");
  expect_error([&] { pad(x, {1, 1, 1, 1, 1, 1}); },
               "[pad] pads [1, 1, 1, 1, 1, 1] name 3 dims but the input of shape [2, 4] has 2");
  expect_error([&] { pad(x, {4, 0}, PadMode::Reflect); },
               "[pad] reflect padding (4, 0) of dim 1 (size 4) must be smaller than the size of the dim (input shape "
               "[2, 4])");
  expect_error([&] { pad(x, {0, 0, 0, 2}, PadMode::Reflect); }, "[pad] reflect padding (0, 2) of dim 0 (size 2)");
  expect_error([&] { pad(x, {5, 0}, PadMode::Circular); },
               "[pad] circular padding (5, 0) of dim 1 (size 4) wraps around more than once");
  expect_error([&] { pad(x, {3, -2}, PadMode::Circular); },
               "[pad] circular padding (3, -2) of dim 1 (size 4) wraps around");
  expect_error([&] { pad(x, {-3, -2}); },
               "[pad] constant padding (-3, -2) of dim 1 (size 4) would leave a negative size");
  expect_error([] { pad(zeros({2, 0}), {1, 0}, PadMode::Replicate); }, "has no element to repeat");
  expect_error([&] { pad(x, {1, 1}, PadMode::Reflect, 2.0); },
               "[pad] value 2 is only used by constant mode, got reflect mode");
}

// --- tril, triu, causal_mask ---

TEST_F(ShapeOps, TrilAndTriuKeepATriangleOfTheLastTwoDims) {
  const Tensor x = (arange(12.0) + 1.0).reshape({3, 4});
  expect_near(tril(x), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  expect_near(tril(x, 1), {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  expect_near(tril(x, -1), {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  expect_near(triu(x), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  expect_near(triu(x, 2), {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0});
  expect_near(triu(x, -1), {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  // Batched: every matrix of the batch gets the same triangle.
  expect_near(sum(tril(ones({2, 3, 3})), {1, 2}), {6, 6});
  EXPECT_GRADCHECK([](auto& v) { return tril(v[0], -1); }, {leaf({2, 3, 4})});
  EXPECT_GRADCHECK([](auto& v) { return triu(v[0], 1); }, {leaf({4, 3})});
  expect_error([] { tril(zeros({3})); }, "[tril] expects a tensor of at least 2 dims, got shape [3]");
  expect_error([] { triu(zeros({})); }, "[triu] expects a tensor of at least 2 dims, got shape []");
}

TEST_F(ShapeOps, CausalMaskIsTheLowerTriangleOfOnes) {
  const Tensor m = causal_mask(3);
  EXPECT_EQ(m.dtype(), kUInt8);
  expect_near(m, {1, 0, 0, 1, 1, 0, 1, 1, 1});
  expect_error([] { causal_mask(-1); }, "[causal_mask] size must be >= 0, got -1");
}

// --- arange ---

TEST_F(ShapeOps, ArangeOfInt64IsExact) {
  // Position ids as a GPT-2 port makes them: int64, exact.
  const Tensor positions = arange(0, 5, 1, kInt64);
  EXPECT_EQ(positions.dtype(), kInt64);
  EXPECT_EQ(ints(positions), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ints(arange(10, 0, -3, kInt64)), (std::vector<int64_t>{10, 7, 4, 1}));
  const int64_t big = int64_t{1} << 52;
  EXPECT_EQ(ints(arange(static_cast<double>(big), static_cast<double>(big + 3), 1, kInt64)),
            (std::vector<int64_t>{big, big + 1, big + 2}));
}

// --- output sizes, errors ---

// Note [Checked size arithmetic]: ops whose output shape adds or broadcasts sizes.
TEST_F(ShapeOps, OutputShapesWhoseSizeOverflowsAreErrors) {
  const int64_t big = int64_t{1} << 32;
  const Tensor column = zeros({1, 1}).expand({big, 1}), row = zeros({1, 1}).expand({1, big});
  const Tensor mask = zeros({1, 1}, kUInt8).expand({big, 1});
  expect_error([&] { return column + row; }, "[add] shape [4294967296, 4294967296] is too large");
  expect_error([&] { return where(mask, column, row); }, "[where] shape [4294967296, 4294967296] is too large");
  const Tensor huge = zeros({1}).expand({int64_t{1} << 62});
  expect_error([&] { cat({huge, huge}, 0); },
               "[cat] the sizes along dim 0 of the 2 tensors (tensor 0 of shape [4611686018427387904]) add up to more "
               "than int64 holds");
  expect_error([&] { stack({huge, huge}, 1); }, "[empty] shape [4611686018427387904, 2] is too large");
}

// cat and stack promote their tensors' dtypes as PyTorch's do (type promotion, core/dtype.h), and
// each tensor's gradient comes back in its own dtype through the cast.
TEST_F(ShapeOps, CatAndStackPromoteDtypes) {
  const Tensor ints = from_vector(std::vector<int64_t>{1, 2}, {2}, kInt64);
  const Tensor mixed = cat({tensor({0.5f}), ints});
  EXPECT_EQ(mixed.dtype(), kFloat32);
  testutil::expect_near(mixed, {0.5, 1, 2}, 0);
  EXPECT_EQ(stack({zeros({2}, kBFloat16), zeros({2}, kFloat16)}).dtype(), kFloat32);
  EXPECT_EQ(cat({ints, ints}).dtype(), kInt64);
  const Tensor a = tensor({1.0, 2.0}).to(kBFloat16).requires_grad_(), b = tensor({3.0}, kFloat64).requires_grad_();
  const Tensor joined = cat({a, b});
  EXPECT_EQ(joined.dtype(), kFloat64);
  sum(joined * tensor({1.0, 2.0, 3.0}, kFloat64)).backward();
  EXPECT_EQ(a.grad().dtype(), kBFloat16);
  testutil::expect_near(a.grad(), {1, 2}, 0);
  testutil::expect_near(b.grad(), {3}, 0);
}

TEST_F(ShapeOps, BadInputThrowsNamingTheOpAndShapes) {
  Tensor idx = from_vector(std::vector<int64_t>{0, 5}, {2}, kInt64);
  expect_error([&] { index_select(zeros({3, 2}), 0, idx); },
               "[index_select] index 5 is out of range for dim 0 of size 3");
  expect_error([&] { index_select(zeros({3, 2}), 0, zeros({2})); }, "[index_select] index must be int64, got float32");
  expect_error([&] { gather(zeros({3, 2}), 1, zeros({3}, kInt64)); },
               "[gather] index of shape [3] must have as many dims");
  expect_error([] { cat({zeros({2, 3}), zeros({2, 4})}, 0); },
               "[cat] tensor 1 of shape [2, 4] does not match tensor 0 of shape [2, 3] outside dim 0");
  expect_error([] { cat({}); }, "[cat] expects a non-empty list");
  expect_error([] { stack({zeros({2}), zeros({3})}); },
               "[stack] tensor 1 of shape [3] differs from tensor 0 of shape [2]");
}
