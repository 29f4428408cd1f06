// autograd::to_dot: the exact text of a small graph, the op names of an MLP training step, the
// dashed box of a checkpointed block, what a backward frees, and bad input.
#include <gtest/gtest.h>

#include <string>

#include "core/autograd/to_dot.h"
#include "core/generator.h"
#include "core/ops.h"
#include "utils/checkpoint.h"
#include "test_helpers.h"

using namespace ember;
using autograd::to_dot;

namespace {

class ToDot : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(0); }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// sum(exp(x) * w): mul saves both of its inputs, exp its output, sum only a shape.
TEST_F(ToDot, SmallGraphExactly) {
  Tensor x = randn({3}).requires_grad_(), w = randn({3}).requires_grad_();
  Tensor y = sum(exp(x) * w);
  EXPECT_EQ(to_dot(y),
            "digraph backward {\n"
            "  graph [fontname=\"Helvetica\", fontsize=10];\n"
            "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
            "  tensor [label=\"tensor [] float32\", shape=ellipse, style=bold];\n"
            "  n0 [label=\"sum\"];\n"
            "  n1 [label=\"mul\\nsaved [3] float32 12 B\\nsaved [3] float32 12 B\"];\n"
            "  n2 [label=\"exp\\nsaved [3] float32 12 B\"];\n"
            "  n3 [label=\"leaf [3] float32\", shape=ellipse];\n"
            "  n4 [label=\"leaf [3] float32\", shape=ellipse];\n"
            "  tensor -> n0;\n"
            "  n0 -> n1;\n"
            "  n1 -> n2;\n"
            "  n1 -> n3;\n"
            "  n2 -> n4;\n"
            "}\n");
}

TEST_F(ToDot, SameGraphSameText) {
  Tensor x = randn({2, 3}).requires_grad_();
  EXPECT_EQ(to_dot(sum(relu(x) * x)), to_dot(sum(relu(x) * x)));
}

TEST_F(ToDot, AUsedTwiceInputIsOneNodeWithTwoEdges) {
  Tensor x = randn({2}).requires_grad_();
  const std::string dot = to_dot(x * x);
  EXPECT_TRUE(contains(dot, "  n0 -> n1;\n  n0 -> n1;\n")) << dot;
  EXPECT_FALSE(contains(dot, "n2")) << dot;
}

TEST_F(ToDot, MlpStepHasItsOps) {
  Tensor w1 = randn({20, 16}).requires_grad_(), b1 = zeros({16}).requires_grad_();
  Tensor w2 = randn({16, 5}).requires_grad_(), b2 = zeros({5}).requires_grad_();
  Tensor x = randn({8, 20});
  Tensor target = randint(0, 5, {8});
  Tensor loss = cross_entropy(matmul(relu(matmul(x, w1) + b1), w2) + b2, target);
  const std::string dot = to_dot(loss);
  for (const char* op : {"\"affine", "\"sum", "\"cross_entropy\\nsaved [8, 5] float32 160 B", "\"add",
                         "\"matmul\\nsaved [8, 16] float32 512 B\\nsaved [16, 5] float32 320 B", "\"relu",
                         "\"leaf [20, 16] float32\"", "\"leaf [5] float32\""})
    EXPECT_TRUE(contains(dot, op)) << op << " in\n" << dot;
  EXPECT_FALSE(contains(dot, "cluster")) << dot;
  EXPECT_FALSE(contains(dot, "(freed)")) << dot;
  loss.backward();
  EXPECT_TRUE(contains(to_dot(loss), "\"relu\\nsaved [8, 16] float32 512 B (freed)\"")) << to_dot(loss);
}

TEST_F(ToDot, CheckpointedBlockIsADashedBox) {
  Tensor w = randn({4, 4}).requires_grad_(), b = zeros({4}).requires_grad_();
  Tensor x = randn({2, 4}).requires_grad_();
  auto block = [&](const Tensor& in) { return relu(matmul(in, w) + b); };
  Tensor loss = sum(utils::checkpoint(block, x * 2.0));
  const std::string dot = to_dot(loss);
  const size_t open = dot.find("  subgraph cluster_"), close = dot.find("  }\n", open);
  ASSERT_NE(open, std::string::npos) << dot;
  const std::string box = dot.substr(open, close - open), outside = dot.substr(0, open) + dot.substr(close);
  EXPECT_TRUE(contains(box, "label=\"checkpoint\"; style=dashed;")) << box;
  // The block's three nodes, add included although it saves nothing; their tensors are packed.
  EXPECT_TRUE(contains(box, "\"relu\\nsaved [2, 4] float32 32 B (packed)\"")) << box;
  EXPECT_TRUE(contains(box, "\"add\"")) << box;
  EXPECT_TRUE(contains(box, "\"matmul\\nsaved [2, 4] float32 32 B (packed)\\nsaved [4, 4] float32 64 B (packed)\"")) << box;
  // What came before and after the block, and the leaves, are not in it.
  EXPECT_FALSE(contains(box, "affine")) << box;
  EXPECT_FALSE(contains(box, "sum")) << box;
  EXPECT_FALSE(contains(box, "leaf")) << box;
  EXPECT_TRUE(contains(outside, "\"affine\"")) << outside;
  EXPECT_TRUE(contains(outside, "\"sum\"")) << outside;
  EXPECT_EQ(dot.find("subgraph", close), std::string::npos) << dot;  // one box
}

TEST_F(ToDot, TwoCheckpointsAreTwoBoxes) {
  Tensor w = randn({4, 4}).requires_grad_();
  auto block = [&](const Tensor& in) { return relu(matmul(in, w)); };
  Tensor y = sum(utils::checkpoint(block, utils::checkpoint(block, randn({2, 4}))));
  const std::string dot = to_dot(y);
  const size_t first = dot.find("subgraph cluster_");
  ASSERT_NE(first, std::string::npos) << dot;
  EXPECT_NE(dot.find("subgraph cluster_", first + 1), std::string::npos) << dot;
}

TEST_F(ToDot, LeafAndTensorWithoutGraph) {
  Tensor w = randn({2, 3}).requires_grad_();
  EXPECT_EQ(to_dot(w),
            "digraph backward {\n"
            "  graph [fontname=\"Helvetica\", fontsize=10];\n"
            "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
            "  tensor [label=\"tensor [2, 3] float32\", shape=ellipse, style=bold];\n"
            "  n0 [label=\"leaf [2, 3] float32\", shape=ellipse];\n"
            "  tensor -> n0;\n"
            "}\n");
  const std::string plain = to_dot(randn({2}, kFloat64));
  EXPECT_TRUE(contains(plain, "tensor [label=\"tensor [2] float64\"")) << plain;
  EXPECT_FALSE(contains(plain, "->")) << plain;
}

TEST_F(ToDot, UndefinedTensorIsAnError) {
  testutil::expect_error([] { to_dot(Tensor()); }, "[to_dot] expects a defined tensor");
}

}  // namespace
