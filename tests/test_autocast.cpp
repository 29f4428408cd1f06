// autocast (Note [Autocast] in core/autocast.h): the output dtype of every op of the op table
// under CPU autocast against PyTorch 2.15's (tests/fixtures/autocast_cpu_dtypes.txt, written by
// make_autocast_fixtures.py), regions nesting and turning off, thread-locality, the cast cache
// and the dtype of the gradients.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/autocast.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/op_table.h"
#include "tests/test_helpers.h"
#include "utils/checkpoint.h"

using namespace ember;

namespace {

// label -> {dtype with float32 inputs under bfloat16, under float16, with bfloat16 inputs under bfloat16}
std::map<std::string, std::array<std::string, 3>> pytorch_dtypes() {
  std::ifstream in(EMBER_FIXTURES_DIR "/autocast_cpu_dtypes.txt");
  EXPECT_TRUE(in) << "cannot read autocast_cpu_dtypes.txt";
  std::map<std::string, std::array<std::string, 3>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string label;
    std::array<std::string, 3> dtypes;
    std::getline(fields, label, '\t');
    for (auto& d : dtypes) std::getline(fields, d, '\t');
    out[label] = dtypes;
  }
  return out;
}

std::string output_dtype(const testutil::OpRow& r, const std::vector<Tensor>& base, DType inputs, DType region) {
  Autocast autocast(DeviceType::CPU, region);
  return dtype_name(r.fn(testutil::op_inputs_as(r, base, inputs, kCPU)).dtype());
}

TEST(Autocast, EveryOpsOutputDtypeIsPyTorchs) {
  const auto expected = pytorch_dtypes();
  const auto& table = testutil::op_table();
  ASSERT_EQ(expected.size(), table.size()) << "the fixture has a row per op-table row";
  for (size_t i = 0; i < table.size(); ++i) {
    const testutil::OpRow& r = table[i];
    const std::string label = testutil::op_label(r);
    SCOPED_TRACE(label);
    ASSERT_TRUE(expected.count(label)) << "no PyTorch dtype for this row: regenerate the fixture";
    const std::vector<Tensor> base = testutil::make_op_inputs(r, testutil::op_table_seed(i));
    const auto& want = expected.at(label);
    EXPECT_EQ(output_dtype(r, base, kFloat32, kBFloat16), want[0]) << "float32 inputs, bfloat16 autocast";
    EXPECT_EQ(output_dtype(r, base, kFloat32, kFloat16), want[1]) << "float32 inputs, float16 autocast";
    EXPECT_EQ(output_dtype(r, base, kBFloat16, kBFloat16), want[2]) << "bfloat16 inputs, bfloat16 autocast";
  }
}

TEST(Autocast, RegionsNestTurnOffAndStayOnTheirThread) {
  const Tensor a = randn({2, 3}), b = randn({3, 4});
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
  {
    Autocast outer(DeviceType::CPU);
    EXPECT_TRUE(is_autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), kBFloat16);  // the CPU's default
    EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
    {
      Autocast off(DeviceType::CPU, std::nullopt, false);
      EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
      Autocast half(DeviceType::CPU, kFloat16);
      EXPECT_EQ(matmul(a, b).dtype(), kFloat16);
    }
    EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
    DType other_thread = kBFloat16;
    std::thread([&] { other_thread = matmul(a, b).dtype(); }).join();
    EXPECT_EQ(other_thread, kFloat32);
    // float64 stays float64; an op off the table keeps its inputs' dtype.
    EXPECT_EQ(matmul(a.to(kFloat64), b.to(kFloat64)).dtype(), kFloat64);
    EXPECT_EQ(relu(a).dtype(), kFloat32);
    EXPECT_EQ(relu(matmul(a, b)).dtype(), kBFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::CPU));
  testutil::expect_error([] { Autocast bad(DeviceType::CPU, kFloat32); },
                         "[autocast] computes in bfloat16 or float16, got float32");
}

// A weight used by several ops converts once a region (Note [Autocast]); its gradient comes back
// in float32, the sum of the uses' gradients.
TEST(Autocast, WeightsCastOnceAndTheirGradientsAreFloat32) {
  manual_seed(3);
  const Tensor w = randn({4, 3}).requires_grad_();
  const Tensor x = randn({5, 3});
  Tensor loss;
  {
    Autocast autocast(DeviceType::CPU);
    const Tensor y1 = linear(x, w), y2 = linear(x * 2.0, w);
    EXPECT_EQ(autocast::cached_casts(), 1u);
    EXPECT_EQ(y1.dtype(), kBFloat16);
    loss = mse_loss(y1 + y2, zeros({5, 4}));
    EXPECT_EQ(loss.dtype(), kFloat32);  // the losses compute in float32
  }
  EXPECT_EQ(autocast::cached_casts(), 0u);  // cleared with the outermost region
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  // Within bfloat16's rounding of the float32 gradient.
  const Tensor w32 = w.detach().requires_grad_();
  mse_loss(linear(x, w32) + linear(x * 2.0, w32), zeros({5, 4})).backward();
  EXPECT_LT(max(abs(w.grad() - w32.grad())).item(), 0.05 * max(abs(w32.grad())).item());
}

// A checkpointed block entered under autocast and recomputed in a backward outside the region
// computes in the forward's dtypes: the value check passes and the gradients are bitwise those
// without checkpointing.
TEST(Autocast, CheckpointRecomputesInTheForwardsDtypes) {
  manual_seed(4);
  const Tensor w1 = randn({16, 8}).requires_grad_(), w2 = randn({8, 16}).requires_grad_();
  const Tensor x = randn({6, 8}), target = randn({6, 8});
  auto block = [&](const Tensor& in) { return linear(dropout(gelu(linear(in, w1)), 0.3), w2); };
  auto gradients = [&](bool checkpointed) {
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
    manual_seed(8);
    Tensor loss;
    {
      Autocast autocast(DeviceType::CPU);
      const Tensor y = checkpointed ? utils::checkpoint(block, x) : block(x);
      EXPECT_EQ(y.dtype(), kBFloat16);
      loss = mse_loss(y, target);
    }
    loss.backward();  // outside the region
    return std::vector<std::vector<double>>{testutil::values(w1.grad()), testutil::values(w2.grad())};
  };
  const auto plain = gradients(false);
  const auto checkpointed = gradients(true);
  EXPECT_EQ(checkpointed, plain);
}

}  // namespace
