// layer_norm: values worked out by hand (a large mean, a constant row), what it saves for the
// backward, PyTorch parity of forward and gradients (fixtures from tests/fixtures/make_fixtures.py)
// and the errors for bad input. batch_norm's tests are in tests/test_conv_pool.cpp. The op table
// (tests/op_table.cpp, Note [The op table]) adds the checks every op gets: gradcheck in float64
// (one and two normalized dims, with and without weight and bias), the float32 and 16-bit columns,
// a composed reference and integer inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/saved_tensor.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "tests/fixture.h"
#include "tests/parity.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::testutil;

using NormalizationOps = SeededTest<7>;

TEST_F(NormalizationOps, LayerNormValues) {
  // Each row normalised to mean 0 and variance 1 (biased), then scaled and shifted per column.
  const Tensor x = tensor({1, 2, 3, 10, 10, 40}).reshape({2, 3});
  const double a = std::sqrt(1.5);  // 1 / sqrt(2/3): rstd of the first row
  expect_near(layer_norm(x, {3}, Tensor(), Tensor(), 1e-12), {-a, 0, a, -1 / std::sqrt(2.0), -1 / std::sqrt(2.0),
                                                              std::sqrt(2.0)}, 1e-5);
  expect_near(layer_norm(x, {3}, tensor({1, 2, 3}), tensor({0, 0, 1}), 1e-12), {-a, 0, 3 * a + 1, -1 / std::sqrt(2.0),
                                                                                 -2 / std::sqrt(2.0),
                                                                                 3 * std::sqrt(2.0) + 1}, 1e-5);
  // Over two trailing dims: all six values are one row.
  expect_near(mean(layer_norm(x, {2, 3})), {0.0}, 1e-6);
  // A large mean next to a small spread: the shifted sums keep the variance (Note [Layer-norm statistics]).
  expect_near(layer_norm(tensor({10000.0, 10001.0, 10002.0}), {3}, Tensor(), Tensor(), 1e-12), {-a, 0, a}, 1e-4);
  // A constant row has variance 0: normalised to 0 (x - mean = 0), not NaN.
  expect_near(layer_norm(full({1, 4}, 3.0), {4}), {0, 0, 0, 0});
}

TEST_F(NormalizationOps, LayerNormSavesInputAndRowStatistics) {
  SavedTensors saved;
  const Tensor x = leaf({4, 3, 8}), weight = leaf({8}), bias = leaf({8});
  Tensor y;
  {
    autograd::SavedTensorHooksGuard guard(saved.hooks());
    y = layer_norm(x, {8}, weight, bias);
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : saved.tensors) shapes.push_back(t.shape());
  EXPECT_EQ(shapes, (std::vector<Shape>{{4, 3, 8}, {8}, {12}, {12}}));  // x, weight, mean, rstd
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), x.shape());
}

TEST_F(NormalizationOps, LayerNormErrors) {
  expect_error([] { layer_norm(zeros({2, 3}), {2}); },
               "[layer_norm] normalized_shape [2] must be the trailing dims of the input of shape [2, 3]");
  expect_error([] { layer_norm(zeros({2, 3}), {}); }, "[layer_norm] normalized_shape [] must be the trailing dims");
  expect_error([] { layer_norm(zeros({3}), {2, 3}); }, "must be the trailing dims of the input of shape [3]");
  expect_error([] { layer_norm(zeros({2, 3}), {3}, zeros({2})); },
               "[layer_norm] weight of shape [2] must have the normalized shape [3]");
  expect_error([] { layer_norm(zeros({2, 3}), {3}, Tensor(), zeros({3}, kFloat64)); },
               "[layer_norm] bias is float64 but the input is float32");
  expect_error([] { layer_norm(zeros({2, 3}), {3}, Tensor(), Tensor(), 0.0); },
               "[layer_norm] eps must be finite and > 0, got 0");
  expect_error([] { layer_norm(zeros({2, 3}, kInt64), {3}); }, "[layer_norm] expects a floating point tensor");
}

// Note [Mixed-dtype layer norm]: a 16-bit input with float32 weight and bias computes in float32
// and rounds once, as PyTorch's CPU kernel (which gives bfloat16 out, x's gradient in bfloat16
// and the weight's in float32); any other mix of dtypes is refused.
TEST_F(NormalizationOps, LayerNormMixesASixteenBitInputWithFloat32Affine) {
  for (DType half : {kBFloat16, kFloat16}) {
    const Tensor x = randn({3, 4}).to(half).requires_grad_(), w = randn({4}).requires_grad_(),
                 b = randn({4}).requires_grad_();
    const Tensor y = layer_norm(x, {4}, w, b);
    EXPECT_EQ(y.dtype(), half);
    EXPECT_TRUE(testutil::bitwise_equal(y, layer_norm(x.detach().to(kFloat32), {4}, w.detach(), b.detach()).to(half)));
    sum(y * arange(12, kFloat32).reshape({3, 4}).to(half)).backward();
    EXPECT_EQ(x.grad().dtype(), half);
    EXPECT_EQ(w.grad().dtype(), kFloat32);
    EXPECT_EQ(b.grad().dtype(), kFloat32);
    // Under CPU autocast a float32 LayerNorm after a Linear gets the Linear's 16-bit output.
    nn::Linear fc(4, 4);
    nn::LayerNorm norm(4);
    Tensor out;
    {
      const Autocast amp(DeviceType::CPU, half);
      out = norm(fc(randn({2, 4})));
    }
    EXPECT_EQ(out.dtype(), half);
  }
  expect_error([] { layer_norm(zeros({2, 3}), {3}, zeros({3}, kBFloat16)); },
               "[layer_norm] weight is bfloat16 but the input is float32");
  expect_error([] { layer_norm(zeros({2, 3}, kBFloat16), {3}, zeros({3}), zeros({3}, kBFloat16)); },
               "[layer_norm] weight is float32 but the input is bfloat16");
  expect_error([] { layer_norm(zeros({2, 3}, kBFloat16), {3}, zeros({3}, kFloat16)); },
               "[layer_norm] weight is float16 but the input is bfloat16");
}

void check_layer_norm_parity(const std::string& file) {
  Fixture f = Fixture::load(file);
  Tensor x = fixture_leaf(f, "x"), weight = fixture_leaf(f, "weight"), bias = fixture_leaf(f, "bias");
  Tensor out = layer_norm(x, {4, 6}, weight, bias, 1e-5);
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES_FIXTURE(f, "out", out);
  EXPECT_MATCHES_FIXTURE(f, "grad_x", x.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_weight", weight.grad());
  EXPECT_MATCHES_FIXTURE(f, "grad_bias", bias.grad());
  Tensor xp = fixture_leaf(f, "x");
  Tensor plain = layer_norm(xp, {6}, Tensor(), Tensor(), 1e-3);
  sum(plain * f.get("w")).backward();
  EXPECT_MATCHES_FIXTURE(f, "out_plain", plain);
  EXPECT_MATCHES_FIXTURE(f, "grad_plain_x", xp.grad());
}
TEST_F(NormalizationOps, LayerNormParity) { check_layer_norm_parity("parity_layer_norm.txt"); }
TEST_F(NormalizationOps, LayerNormParityFloat64) { check_layer_norm_parity("parity_layer_norm_f64.txt"); }
