// embedding: rows looked up by hand, repeated ids' gradients added (bitwise, in id order), the
// padding row that gets no gradient, PyTorch parity of forward and gradients (fixtures from
// tests/fixtures/make_fixtures.py; with padding_idx, ClampGeluEmbeddingParity in
// test_elementwise_ops.cpp) and the errors for bad input. The op table (tests/op_table.cpp, Note
// [The op table]) adds the checks every op gets: gradcheck in float64 (repeated ids included), the
// float32 and 16-bit columns and integer inputs.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::testutil;

using EmbeddingOps = SeededTest<7>;

TEST_F(EmbeddingOps, EmbeddingLooksUpRowsAndAddsRepeatedGradients) {
  const Tensor weight = arange(8.0).reshape({4, 2}).requires_grad_();
  const Tensor ids = from_vector(std::vector<int64_t>{2, 0, 2, 3, 2, 1}, {2, 3}, kInt64);
  Tensor y = embedding(weight, ids);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  expect_near(y, {4, 5, 0, 1, 4, 5, 6, 7, 4, 5, 2, 3});
  sum(y * arange(12.0).reshape({2, 3, 2})).backward();
  // row 2 gets the gradient rows 0, 2 and 4: (0+4+8, 1+5+9)
  expect_near(weight.grad(), {2, 3, 10, 11, 12, 15, 6, 7});
  // A scalar id gives one row of shape [dim]; an empty id list gives [0, dim].
  EXPECT_EQ(embedding(weight, scalar_tensor(1, kInt64)).shape(), (Shape{2}));
  EXPECT_EQ(embedding(weight, zeros({0}, kInt64)).shape(), (Shape{0, 2}));
}

TEST_F(EmbeddingOps, EmbeddingBackwardOfManyIdsIsTheSumPerRow) {
  // 4000 ids over 50 rows: each row's gradient is the sum of its gradient rows, in id order.
  const Tensor weight = zeros({50, 33}).requires_grad_();
  const Tensor ids = randint(0, 50, {40, 100});
  const Tensor g = randn({40, 100, 33});
  sum(embedding(weight, ids) * g).backward();
  const std::vector<int64_t> id = ids.to_vector<int64_t>();
  const std::vector<float> gv = g.to_vector<float>();
  std::vector<float> want(50 * 33, 0.0f);
  for (size_t j = 0; j < id.size(); ++j)
    for (size_t c = 0; c < 33; ++c) want[static_cast<size_t>(id[j]) * 33 + c] += gv[j * 33 + c];
  EXPECT_EQ(weight.grad().to_vector<float>(), want);  // bitwise: the same additions in the same order
}

TEST_F(EmbeddingOps, EmbeddingPaddingRowGetsNoGradient) {
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

TEST_F(EmbeddingOps, EmbeddingErrors) {
  const Tensor weight = zeros({5, 3});
  expect_error([&] { embedding(weight, tensor({1, 5}).to(kInt64)); },
               "[embedding] id 5 is out of range for a table of 5 embeddings (weight shape [5, 3])");
  expect_error([&] { embedding(weight, tensor({-1}).to(kInt64)); }, "[embedding] id -1 is out of range");
  expect_error([&] { embedding(weight, tensor({1, 2})); }, "[embedding] indices must be int64, got float32");
  expect_error([] { embedding(zeros({5}), zeros({2}, kInt64)); },
               "[embedding] weight must be a 2-D table [num_embeddings, dim], got shape [5]");
  expect_error([] { embedding(zeros({5, 2}, kInt64), zeros({2}, kInt64)); }, "[embedding] expects a floating point");
}

TEST_F(EmbeddingOps, EmbeddingParity) {
  Fixture f = Fixture::load("parity_embedding.txt");
  Tensor weight = fixture_leaf(f, "weight");
  Tensor out = embedding(weight, f.get("indices"));
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES_FIXTURE(f, "out", out);
  EXPECT_MATCHES_FIXTURE(f, "grad_weight", weight.grad());
}
