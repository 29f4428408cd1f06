// Tensor basics: factories, metadata, views sharing storage, conversions, printing, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/allocator.h"
#include "core/memory_overlap.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::values;

// Note [Huge allocations under AddressSanitizer]
// The system allocator answers a request it cannot meet with nullptr, which ember's allocator
// turns into an ember::Error. AddressSanitizer instead aborts on requests above its 1 TiB limit
// unless told to return nullptr like the system does; this hook (read by ASan at startup, unused
// in other builds) tells it so, so the allocation tests below see the same Error in every build.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace {
}  // namespace

TEST(Tensor, FactoriesHaveShapeDtypeAndValues) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(values(z), std::vector<double>(6, 0.0));
  EXPECT_EQ(values(ones({4}, kInt64)), std::vector<double>(4, 1.0));
  EXPECT_EQ(values(full({2}, 2.5, kFloat64)), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(values(arange(5)), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(values(arange(1, 2, 0.25)), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  Tensor v = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(v.at({1, 2}), 6.0);
  uint8_t raw[3] = {7, 8, 255};
  Tensor u = from_buffer(raw, {3}, kUInt8, kUInt8);
  EXPECT_EQ(u.dtype(), kUInt8);
  EXPECT_EQ(values(u), (std::vector<double>{7, 8, 255}));
  EXPECT_EQ(scalar_tensor(3.5).dim(), 0);
  EXPECT_EQ(scalar_tensor(3.5).item(), 3.5);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor a = arange(12).reshape({3, 4});
  Tensor t = a.t();
  EXPECT_EQ(t.shape(), (Shape{4, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.at({3, 1}), 7.0);
  Tensor row = a.select(0, 1);
  EXPECT_EQ(values(row), (std::vector<double>{4, 5, 6, 7}));
  Tensor col = a.narrow(1, 2, 2);
  EXPECT_EQ(col.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(col), (std::vector<double>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(values(a.slice(1, 0, 4, 2)), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(values(a.slice(0, -1, 3)), (std::vector<double>{8, 9, 10, 11}));
  row.fill_(-1);  // writes through the view
  EXPECT_EQ(a.at({1, 0}), -1.0);
  EXPECT_EQ(a.at({1, 3}), -1.0);
  EXPECT_EQ(a.storage(), t.storage());
  EXPECT_EQ(a.permute({1, 0}).shape(), (Shape{4, 3}));
  EXPECT_EQ(a.unsqueeze(0).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(a.unsqueeze(1).squeeze().shape(), (Shape{3, 4}));
  EXPECT_EQ(a.unsqueeze(1).squeeze(1).shape(), (Shape{3, 4}));
  EXPECT_EQ(zeros({2, 3, 4}).flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(zeros({2, 3, 4}).reshape({-1, 4}).shape(), (Shape{6, 4}));
  Tensor e = tensor({1, 2, 3}).expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(values(e), (std::vector<double>{1, 2, 3, 1, 2, 3}));
}

TEST(Tensor, ReshapeCopiesOnlyWhenItMust) {
  Tensor a = arange(6).reshape({2, 3});
  EXPECT_EQ(a.reshape({3, 2}).storage(), a.storage());  // contiguous: a view
  Tensor t = a.t();
  Tensor r = t.reshape({6});  // transposed: must copy
  EXPECT_NE(r.storage(), a.storage());
  EXPECT_EQ(values(r), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(t.view({6}), Error);
}

TEST(Tensor, ContiguousCloneAndCast) {
  Tensor a = arange(6).reshape({2, 3});
  Tensor c = a.t().contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(values(c), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(a.contiguous().is_same(a));
  Tensor cl = a.clone();
  cl.fill_(1);
  EXPECT_EQ(a.at({0, 0}), 0.0);
  Tensor f = tensor({1.7, -2.2, 3.9});
  EXPECT_EQ(values(f.to(kInt64)), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(f.to(kFloat64).dtype(), kFloat64);
  Tensor wide = from_vector(std::vector<int64_t>{300, 2}, {2}, kInt64);
  EXPECT_EQ(values(wide.to(kUInt8)), (std::vector<double>{44, 2}));  // wraps modulo 256, as C++ and PyTorch
}

// Strided views with an empty dim, and rows of a few elements across many outer dims: the
// elementwise loops visit each row once, stepping through the outer dims (Note [CPU elementwise
// loops]), and visit nothing when a dim is 0.
TEST(Tensor, StridedCopiesAndOpsVisitEveryRowOnce) {
  for (const Shape& shape : {Shape{0, 3, 4}, Shape{3, 0, 4}, Shape{3, 4, 0}}) {
    const Tensor x = zeros(shape).permute({2, 0, 1});
    EXPECT_EQ(x.contiguous().numel(), 0);
    EXPECT_EQ((x + x).numel(), 0);
  }
  const Tensor x = arange(2 * 3 * 5 * 7).reshape({2, 3, 5, 7});
  const Tensor y = x.permute({0, 2, 1, 3}).contiguous();  // rows of 7 across 2 x 5 x 3 outer dims
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 5; ++b)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t d = 0; d < 7; ++d) ASSERT_EQ(y.at({a, b, c, d}), x.at({a, c, b, d}));
  EXPECT_EQ(values(x.permute({0, 2, 1, 3}) * 2.0), values(y * 2.0));
}

// Note [Float to integer conversion]: one rule on every device, for the cases C++ leaves undefined.
TEST(Tensor, FloatToIntegerConversionSaturatesThenWraps) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double two63 = 9223372036854775808.0;
  constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  const std::vector<double> edges{nan, inf, -inf, two63, -two63, 1e300, -1e300, -2.9, 2.9, -1.0, 300.5, -0.5};
  for (DType from : {kFloat64, kFloat32}) {
    const Tensor x = from_vector(edges, {static_cast<int64_t>(edges.size())}, from);
    EXPECT_EQ(x.to(kInt64).to_vector<int64_t>(),
              (std::vector<int64_t>{0, kMax, kMin, kMax, kMin, kMax, kMin, -2, 2, -1, 300, 0}))
        << from;
    // uint8: the int64 above, modulo 256.
    EXPECT_EQ(values(x.to(kUInt8)), (std::vector<double>{0, 255, 0, 255, 0, 255, 0, 254, 2, 255, 44, 0})) << from;
  }
  // The largest float below 2^63 still converts exactly.
  EXPECT_EQ(from_vector(std::vector<double>{std::nextafter(two63, 0.0)}, {1}, kFloat64).to(kInt64).to_vector<int64_t>(),
            (std::vector<int64_t>{9223372036854774784}));
  // The same rule where a kernel produces integers from floats: an unchecked 0-d tensor, an integer op computed
  // in double, item<T>. (full and fill_ refuse such a value: FillValues.EveryDtypeRefusesAValueItCannotHold.)
  EXPECT_EQ(scalar_tensor(nan, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(scalar_tensor(-inf, kUInt8).to_vector<uint8_t>(), (std::vector<uint8_t>{0}));
  EXPECT_EQ(values(full({1}, 2.0, kUInt8) - full({1}, 3.0, kUInt8)), (std::vector<double>{255}));
  EXPECT_EQ(scalar_tensor(nan).item<int64_t>(), 0);
  EXPECT_EQ(scalar_tensor(1e30).item<int64_t>(), kMax);
  EXPECT_EQ(scalar_tensor(-inf).to_vector<int64_t>(), (std::vector<int64_t>{kMin}));
}

TEST(Tensor, InPlaceOpsBumpTheVersion) {
  Tensor a = zeros({3});
  uint64_t v0 = a.version();
  a.add_(ones({3}));
  a.mul_(tensor({2, 3, 4}));
  a.add_(ones({3}), 0.5);
  EXPECT_EQ(values(a), (std::vector<double>{2.5, 3.5, 4.5}));
  a.mul_(2.0);
  a.copy_(tensor({7, 8, 9}));
  EXPECT_EQ(values(a), (std::vector<double>{7, 8, 9}));
  a.zero_();
  EXPECT_EQ(values(a), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(a.version(), v0 + 6);
  Tensor view = a.narrow(0, 1, 1);
  view.fill_(5);
  EXPECT_EQ(a.version(), v0 + 7);  // one counter per storage
  Tensor m = zeros({2, 3});
  m.add_(tensor({1, 2, 3}));  // broadcast source
  EXPECT_EQ(values(m), (std::vector<double>{1, 2, 3, 1, 2, 3}));
}

// Note [In-place writes and memory overlap]: refused where the result would depend on the order
// in which elements are written; an exact alias and disjoint views are fine.
TEST(Tensor, InPlaceWritesRefuseOverlappingOperands) {
  const std::string partial = "unsupported operation: some elements of the input tensor";
  const std::string internal = "unsupported operation: more than one element of the written-to tensor";
  Tensor x = arange(9).reshape({3, 3});
  expect_error([&] { x.add_(x.t()); }, "[add_] " + partial + " of shape [3, 3] (strides [1, 3])");
  expect_error([&] { x.mul_(x.t()); }, "[mul_] " + partial);
  expect_error([&] { x.copy_(x.t()); }, "[copy_] " + partial);
  expect_error([&] { x.add_(x.t(), 2.0); }, "[add_] " + partial);  // checked before alpha scales a copy
  expect_error([&] { x.add_(x.select(0, 0)); }, "[add_] " + partial);         // row 0 is read and written
  Tensor line = arange(6);
  expect_error([&] { line.narrow(0, 0, 3).copy_(line.narrow(0, 1, 3)); }, "[copy_] " + partial);
  EXPECT_EQ(values(x), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8}));  // nothing was written

  Tensor row = zeros({3});
  Tensor broadcast = row.expand({2, 3});
  expect_error([&] { broadcast.add_(ones({2, 3})); }, "[add_] " + internal + " of shape [2, 3] (strides [0, 1])");
  expect_error([&] { broadcast.mul_(2.0); }, "[mul_] " + internal);
  expect_error([&] { broadcast.copy_(ones({2, 3})); }, "[copy_] " + internal);
  broadcast.fill_(4.0);  // one value everywhere: no order to depend on
  EXPECT_EQ(values(row), (std::vector<double>{4, 4, 4}));

  x.add_(x);  // every element reads only itself
  x.mul_(x.view({3, 3}));
  EXPECT_EQ(values(x), (std::vector<double>{0, 4, 16, 36, 64, 100, 144, 196, 256}));
  x.select(0, 0).copy_(x.select(0, 2));  // disjoint rows of one storage
  EXPECT_EQ(values(x.select(0, 0)), (std::vector<double>{144, 196, 256}));
  Tensor single = zeros({1, 1});
  single.add_(single.t());  // size-1 dims: the same single element
  Tensor three = zeros({3});
  make_view(three, {1, 3}, {0, 1}, 0).add_(ones({1, 3}));  // stride 0 on a size-1 dim repeats nothing
  EXPECT_EQ(values(three), (std::vector<double>{1, 1, 1}));
  line.slice(0, 0, 6, 2).copy_(line.slice(0, 1, 6, 2));  // strided views: not worked out, allowed as PyTorch
  EXPECT_EQ(values(line), (std::vector<double>{1, 1, 3, 3, 5, 5}));
}

TEST(Tensor, OverlapClassifiesViewsOfOneStorage) {
  Tensor x = zeros({4, 4});
  EXPECT_EQ(overlap(x, x), Overlap::Full);
  EXPECT_EQ(overlap(x, x.view({16})), Overlap::Partial);  // same bytes, other shape: elements pair up differently
  EXPECT_EQ(overlap(x, x.reshape({4, 4})), Overlap::Full);
  EXPECT_EQ(overlap(x, x.t()), Overlap::Partial);
  EXPECT_EQ(overlap(x.select(0, 1), x.select(0, 2)), Overlap::No);
  EXPECT_EQ(overlap(x, zeros({4, 4})), Overlap::No);
  EXPECT_EQ(overlap(x, x.slice(1, 0, 4, 2)), Overlap::TooHard);
  EXPECT_TRUE(is_non_overlapping_and_dense(x.t()));
  EXPECT_TRUE(is_non_overlapping_and_dense(x.permute({1, 0}).unsqueeze(1)));
  EXPECT_FALSE(is_non_overlapping_and_dense(x.narrow(1, 0, 2)));
  EXPECT_FALSE(is_non_overlapping_and_dense(x.select(0, 0).expand({3, 4})));
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(tensor({1, 2, 3}).str(), "tensor([1., 2., 3.])");
  EXPECT_EQ(tensor({0.5, -1.25}).str(), "tensor([ 0.5000, -1.2500])");
  EXPECT_EQ(arange(4, kInt64).reshape({2, 2}).str(), "tensor([[0, 1],\n        [2, 3]])");
  EXPECT_EQ(scalar_tensor(2.5).str(), "tensor(2.5000)");
  EXPECT_EQ(ones({2}, kFloat64).str(), "tensor([1., 1.], dtype=float64)");
  Tensor w = ones({2}).requires_grad_();
  EXPECT_EQ(w.str(), "tensor([1., 1.], requires_grad=True)");
  EXPECT_EQ((w * 2.0).str(), "tensor([2., 2.], grad_fn=<affine>)");
  std::string big = arange(2000).str();
  EXPECT_NE(big.find("..."), std::string::npos);
  EXPECT_EQ(big.substr(0, 20), "tensor([   0.,    1.");
}

TEST(Tensor, BadInputThrowsNamingTheOp) {
  Tensor a = zeros({2, 3});
  auto expect_error = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected an ember::Error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { a.reshape({4, 2}); }, "[reshape] shape [4, 2] is invalid for input of shape [2, 3]");
  expect_error([&] { a.transpose(0, 2); }, "[transpose] dim 2 is out of range");
  expect_error([&] { a.narrow(1, 2, 2); }, "[narrow] start 2 and length 2 are out of range for dim 1 of size 3");
  expect_error([&] { a.expand({4, 3}); }, "[expand] cannot expand shape [2, 3] to [4, 3]");
  expect_error([&] { a.item(); }, "[item] a tensor with 6 elements");
  expect_error([&] { a.at({2, 0}); }, "[at] index 2 is out of range for dim 0 of size 2");
  expect_error([&] { a.select(0, 5); }, "[select] index 5 is out of range");
  expect_error([&] { a.permute({0, 0}); }, "[permute] dim 0 repeats");
  expect_error([&] { a.reshape({-1, -1}); }, "[reshape] only one dimension can be inferred");
  expect_error([&] { from_vector(std::vector<float>{1, 2}, {3}); }, "[from_vector] 2 value(s) cannot fill");
  expect_error([&] { zeros({2}, kInt64).requires_grad_(); }, "[requires_grad_] only floating point");
  expect_error([&] { Device("gpu"); }, "[device] cannot parse device 'gpu'");
  expect_error([&] { a.add_(zeros({3, 3})); }, "[add_] shapes [2, 3] and [3, 3] cannot be broadcast");
  expect_error([&] { zeros({3}).add_(zeros({2, 3})); }, "[add_] cannot write a result of shape [2, 3]");
}

// --- size arithmetic (Note [Checked size arithmetic]) ---

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(TensorSizes, ShapesWhoseSizeOverflowsAreErrors) {
  // numel fits, the byte count does not.
  expect_error([] { zeros({int64_t{1} << 62}); },
               "[empty] shape [4611686018427387904] is too large: 4611686018427387904 * 4 overflows int64");
  expect_error([] { zeros({(int64_t{1} << 62) + 1}); }, "[empty] shape [4611686018427387905] is too large");
  // numel does not fit.
  expect_error([] { empty({int64_t{1} << 32, int64_t{1} << 32}, kUInt8); },
               "[empty] shape [4294967296, 4294967296] is too large: the product of its dims overflows int64");
  // No elements, but the strides would overflow.
  expect_error([] { zeros({0, int64_t{1} << 40, int64_t{1} << 40}); },
               "[empty] shape [0, 1099511627776, 1099511627776] is too large");
  expect_error([] { empty({2, -3}); }, "[empty] negative dimension -3 in shape [2, -3]");
  expect_error([] { ones({kMin}); }, "[empty] negative dimension -9223372036854775808");
  // Two negative dims whose product is the right count.
  expect_error([] { from_vector(std::vector<float>{1, 2}, {-1, -2}); },
               "[from_vector] negative dimension -1 in shape [-1, -2]");
  // The largest valid shapes still work when they hold nothing.
  EXPECT_EQ(zeros({0, int64_t{1} << 40}).strides(), (Shape{int64_t{1} << 40, 1}));
}

TEST(TensorSizes, AllocationsTooLargeForTheMachineAreErrors) {
  const int64_t live = memory::stats().live_bytes;
  // 2^48 bytes: more than a 64-bit Linux process can address, whatever the overcommit policy.
  expect_error([] { empty({int64_t{1} << 46}); },
               "[allocator] out of memory on cpu: the system refused a block for a tensor of 256.00 TiB "
               "(281474976710656 bytes)");
  // arange fills its tensor in place, so the allocator (not a std::vector) reports the size.
  expect_error([] { arange(0, 1e18); }, "a tensor of 7275957.61 TiB (8000000000000000000 bytes)");
  EXPECT_EQ(memory::stats().live_bytes, live);  // a failed allocation is not counted
}

TEST(TensorSizes, ViewsCannotReachAnOverflowingShape) {
  const Tensor one = zeros({1, 1});
  expect_error([&] { one.expand({int64_t{1} << 40, int64_t{1} << 40}); },
               "[expand] shape [1099511627776, 1099511627776] is too large");
  expect_error([&] { zeros({1}).expand({-5}); }, "[expand] negative dimension -5");
  // A valid view whose byte count would overflow size_t.
  expect_error([] { zeros({1}).expand({int64_t{1} << 62}).nbytes(); },
               "[nbytes] shape [4611686018427387904] is too large");
  const Tensor empty_one = zeros({0});
  expect_error([&] { empty_one.reshape({-1, int64_t{1} << 40, int64_t{1} << 40}); },
               "[reshape] shape [-1, 1099511627776, 1099511627776] is too large: "
               "1099511627776 * 1099511627776 overflows int64");
  expect_error([&] { empty_one.reshape({0, int64_t{1} << 40, int64_t{1} << 40}); },
               "[reshape] shape [0, 1099511627776, 1099511627776] is too large");
  expect_error([&] { empty_one.view({int64_t{1} << 40, 0, int64_t{1} << 40}); },
               "[view] shape [1099511627776, 0, 1099511627776] is too large");
}

TEST(TensorSizes, NarrowChecksBoundsWithoutOverflow) {
  const Tensor a = arange(4);
  expect_error([&] { a.narrow(0, 1, kMax); },
               "[narrow] start 1 and length 9223372036854775807 are out of range for dim 0 of size 4");
  expect_error([&] { a.narrow(0, kMax, 1); }, "[narrow] start 9223372036854775807 and length 1 are out of range");
  expect_error([&] { a.narrow(0, kMin, 1); }, "are out of range for dim 0 of size 4");
  expect_error([&] { a.narrow(0, 5, 0); }, "[narrow] start 5 and length 0 are out of range");
  expect_error([&] { a.narrow(0, 0, kMin); }, "[narrow] start 0 and length -9223372036854775808");
  EXPECT_EQ(values(a.narrow(0, 4, 0)), std::vector<double>{});
  EXPECT_EQ(values(a.narrow(0, -3, 3)), (std::vector<double>{1, 2, 3}));
}

TEST(TensorSizes, SliceLengthsDoNotOverflow) {
  const Tensor a = arange(10);
  EXPECT_EQ(values(a.slice(0, 0, 10, 3)), (std::vector<double>{0, 3, 6, 9}));
  EXPECT_EQ(values(a.slice(0, 0, 10, kMax)), (std::vector<double>{0}));
  EXPECT_EQ(values(a.slice(0, 7, kMax, kMax)), (std::vector<double>{7}));
  EXPECT_EQ(values(a.slice(0, kMin, kMax, 4)), (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(values(a.slice(0, kMax, kMin)), std::vector<double>{});
  EXPECT_EQ(values(a.slice(0, -2, kMax, kMax)), (std::vector<double>{8}));
  // A huge step on an outer dim: the view's stride (10 * step) must not overflow.
  const Tensor m = arange(20).reshape({2, 10});
  EXPECT_EQ(values(m.slice(0, 1, 2, kMax)), (std::vector<double>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  // ...and backward routes the gradient to the one element selected.
  Tensor x = arange(4, kFloat32).requires_grad_();
  x.slice(0, 1, 4, kMax).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 1, 0, 0}));
  expect_error([&] { a.slice(0, 0, 10, kMin); }, "[slice] step must be positive, got -9223372036854775808");
}

TEST(TensorSizes, ArangeRejectsBadStepsAndCounts) {
  expect_error([] { arange(0, 1, 0); }, "[arange] start 0, end 1 and step 0 must be finite, with a nonzero step");
  expect_error([] { arange(0, std::nan(""), 1); }, "[arange] start 0, end nan and step 1 must be finite");
  expect_error([] { arange(0, INFINITY, 1); }, "[arange] start 0, end inf and step 1 must be finite");
  expect_error([] { arange(0, 1, std::nan("")); }, "must be finite, with a nonzero step");
  expect_error([] { arange(0, 1e19); }, "[arange] start 0, end 1e+19 and step 1 give more than INT64_MAX elements");
  expect_error([] { arange(-1e308, 1e308, 1e-300); }, "give more than INT64_MAX elements");
  expect_error([] { arange(1, 0, 1); }, "[arange] start 1, end 0 and step 1 are inconsistent");
  expect_error([] { arange(1, 0.5, 1); }, "[arange] start 1, end 0.5 and step 1 are inconsistent");
  EXPECT_EQ(values(arange(3, 0, -1)), (std::vector<double>{3, 2, 1}));
}

TEST(TensorSizes, RandintBoundsMustBeExactDoubles) {
  expect_error([] { randint(kMin, kMax, {2}); },
               "[randint] low (-9223372036854775808) and high (9223372036854775807) must be within "
               "[-9007199254740992, 9007199254740992]");
  expect_error([] { randint(-1, kMax, {2}); }, "[randint] low (-1) and high (9223372036854775807) must be within");
  // No overflow here, but 2^60 + 10 is no double: every draw would be 2^60.
  expect_error([] { randint(int64_t{1} << 60, (int64_t{1} << 60) + 10, {2}); }, "where doubles hold every integer");
  const int64_t exact = int64_t{1} << 53;
  for (int64_t v : randint(-exact, exact, {64}).to_vector<int64_t>()) {
    EXPECT_GE(v, -exact);
    EXPECT_LT(v, exact);
  }
  for (int64_t v : randint(-5, -2, {64}).to_vector<int64_t>()) {
    EXPECT_GE(v, -5);
    EXPECT_LT(v, -2);
  }
}

TEST(TensorSizes, DeviceStringsWithBadIndicesAreErrors) {
  for (const char* spec : {"cuda:99999999999", "cuda:2147483648", "cuda:abc", "cuda:-1", "cuda:1x", "cuda:",
                           "cuda:+1", "cuda: 1", "cudax"})
    expect_error([&] { Device{std::string(spec)}; }, std::string("[device] cannot parse device '") + spec + "'");
  EXPECT_EQ(Device("cuda:2147483647").index, 2147483647);
  EXPECT_EQ(Device("cuda:7"), Device(DeviceType::CUDA, 7));
  EXPECT_EQ(Device("cuda"), kCUDA);
}
