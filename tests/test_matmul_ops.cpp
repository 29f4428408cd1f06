// The products: matmul (1-D operands, batch broadcasting, transposed views), linear and einsum.
// Values worked out by hand and against per-batch loops, PyTorch parity of einsum's forward and
// gradients (fixtures from tests/fixtures/make_fixtures.py), the errors for bad input, and the
// thread count the products run on. The op table (tests/op_table.cpp, Note [The op table]) adds the
// checks every op gets: gradcheck in float64 (every operand shape class included), the float32 and
// 16-bit columns and integer inputs.
#include <gtest/gtest.h>

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

using MatmulOps = SeededTest<42>;

// --- matmul, linear ---

TEST_F(MatmulOps, Matmul) {
  Tensor a = arange(6).reshape({2, 3}), b = arange(12).reshape({3, 4});
  expect_near(matmul(a, b), {20, 23, 26, 29, 56, 68, 80, 92});
  expect_near(matmul(tensor({1, 2, 3}), b), {32, 38, 44, 50});
  expect_near(matmul(a, tensor({1, 1, 1})), {3, 12});
  expect_near(matmul(tensor({1, 2}), tensor({3, 4})), {11});
  EXPECT_EQ(matmul(tensor({1, 2}), tensor({3, 4})).dim(), 0);
  expect_near(matmul(b.t(), a.t()), values(matmul(a, b).t().contiguous()));
  Tensor batched = matmul(randn({5, 2, 3, 4}), randn({2, 4, 6}));
  EXPECT_EQ(batched.shape(), (Shape{5, 2, 3, 6}));
  // batched against a per-batch loop
  Tensor p = randn({3, 2, 4}), q = randn({3, 4, 5});
  Tensor pq = matmul(p, q);
  for (int64_t i = 0; i < 3; ++i) expect_near(pq.select(0, i), values(matmul(p.select(0, i), q.select(0, i))), 1e-5);
}

// linear puts the bias into the product (Note [A bias in the product]); the result is still
// x @ w.t() + b.
TEST_F(MatmulOps, LinearIsTheProductPlusTheBias) {
  const Tensor x = randn({2, 3, 4}), w = randn({5, 4}), b = randn({5});
  expect_near(linear(x, w, b), values(matmul(x, w.t()) + b), 1e-5);
  expect_near(linear(tensor({1, 2}), tensor({1, 1, 0, 1}).reshape({2, 2}), tensor({10, 20})), {13, 22});
  expect_near(linear(zeros({2, 0}), zeros({3, 0}), tensor({1, 2, 3})), {1, 2, 3, 1, 2, 3});  // an empty sum: the bias
}

TEST_F(MatmulOps, ThreadCountIsSettable) {
  int before = get_num_threads();
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  Tensor a = randn({300, 300});
  Tensor single = matmul(a, a);
  set_num_threads(2);
  expect_near(matmul(a, a), values(single), 1e-3);
  set_num_threads(before);
  expect_error([] { set_num_threads(0); }, "[set_num_threads] expects a positive thread count, got 0");
}

// --- einsum ---

TEST_F(MatmulOps, EinsumByHand) {
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

// An equation without a product, which the op table has no row for: under CPU autocast PyTorch
// leaves it in float32 (it casts einsum's matmuls, and there are none) where ember casts every
// einsum (Note [Autocast's table]), so the row's autocast check would fail. The table's einsum
// rows gradcheck the other equations.
TEST_F(MatmulOps, EinsumParity) {
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
    EXPECT_MATCHES_FIXTURE(f, "out_" + name, out);
    sum(out * f.get("w_" + name)).backward();
    for (size_t i = 0; i < inputs.size(); ++i)
      EXPECT_MATCHES_FIXTURE(f, "grad_" + name + "_in" + std::to_string(i), inputs[i].grad());
  }
}

TEST_F(MatmulOps, EinsumErrors) {
  const Tensor a = zeros({2, 3}), b = zeros({4, 5});
  expect_error([&] { einsum("ij,jk->ik", {a, b}); },
               "[einsum] subscript j has size 3 in operand 0 but size 4 in operand 1 of shape [4, 5] (equation "
               "'ij,jk->ik')");
  expect_error([&] { einsum("ij,jk", {a}); },
               "[einsum] equation 'ij,jk' has subscripts for 2 operand(s) but 1 were given");
  expect_error([&] { einsum("i$", {a}); }, "[einsum] invalid character '$' at position 1 of equation 'i$'");
  expect_error([&] { einsum("ijk", {a}); }, "[einsum] operand 0 of shape [2, 3] has 2 dims but its subscripts name 3");
  expect_error([&] { einsum("ijk...", {a}); }, "has 2 dims but its subscripts name 3 and an ellipsis");
  expect_error([&] { einsum("ij->k", {a}); }, "[einsum] output subscript k names no operand's dim in equation 'ij->k'");
  expect_error([&] { einsum("ij->ii", {a}); }, "[einsum] output subscript i appears more than once");
  expect_error([&] { einsum("ii", {a}); },
               "[einsum] subscript i is repeated in operand 0 of shape [2, 3] with sizes 2 and 3");
  expect_error([&] { einsum("i..j", {a}); },
               "[einsum] '.' at position 1 of equation 'i..j' is not part of an ellipsis");
  expect_error([&] { einsum("...i...", {a}); }, "[einsum] more than one ellipsis");
  expect_error([&] { einsum("i->i->i", {zeros({2})}); }, "has more than one '->'");
  expect_error([] { einsum("i", {}); }, "[einsum] needs at least one operand");
  expect_error([] { einsum("i", {zeros({2}, kInt64)}); }, "[einsum] expects a floating point tensor, got int64");
}

// --- errors ---

TEST_F(MatmulOps, BadInputThrowsNamingTheOpAndShapes) {
  expect_error([] { matmul(zeros({2, 3}), zeros({4, 5})); },
               "[matmul] shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  expect_error([] { matmul(zeros({2, 3}), zeros({3, 5}, kFloat64)); },
               "[matmul] expected one dtype, got float32 and float64");
  expect_error([] { matmul(zeros({2, 3}, kInt64), zeros({3, 5}, kInt64)); },
               "[matmul] expects a floating point tensor, got int64");
  expect_error([] { matmul(zeros({2, 3, 4}), zeros({5, 4, 2})); }, "[matmul] shapes [2] and [5] cannot be broadcast");
  expect_error([] { matmul(scalar_tensor(1), zeros({2})); }, "[matmul] both arguments need at least 1 dim");
  expect_error([] { linear(zeros({2, 3}), zeros({4, 5}), zeros({4})); },
               "[linear] input of shape [2, 3] does not match the weight's in_features 5 (weight [4, 5])");
  expect_error([] { linear(zeros({2, 3}), zeros({4, 3}), zeros({3})); },
               "[linear] bias of shape [3] does not match the weight's out_features 4 (weight [4, 3])");
  expect_error([] { linear(zeros({2, 3}), zeros({3}), Tensor()); },
               "[linear] expects a 2-D weight [out_features, in_features], got shape [3]");
  expect_error([] { linear(zeros({2, 3}), zeros({4, 3}), zeros({4}, kFloat64)); },
               "[linear] expected one dtype, got input float32, weight float32 and bias float64");
}
