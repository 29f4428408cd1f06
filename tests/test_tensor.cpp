// Tensor basics: factories, metadata, views sharing storage, conversions, printing, bad input.
#include <gtest/gtest.h>

#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using testutil::values;

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
