// What callers pass is checked where it enters, with an ember::Error naming the op: enums cast
// from numbers past their enumerators (Note [Enums from callers] in core/device.h), plans with
// gaps or overlaps, gradients of another dtype or device, equations whose tensors could never be
// allocated, and words that once made the tokenizer quadratic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/autocast.h"
#include "core/cpu_settings.h"
#include "core/ops.h"
#include "core/system_memory.h"
#include "core/version.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module_list.h"
#include "nn/transformer_encoder.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/reduce_lr_on_plateau.h"
#include "optim/sgd.h"
#include "test_helpers.h"
#include "utils/planner.h"

using namespace ember;
using testutil::expect_error;

namespace {

template <class E>
E bad(int value) {
  return static_cast<E>(value);
}

TEST(EnumsFromCallers, AreRefusedByNameWhereTheyEnter) {
  expect_error([] { (void)Device(bad<DeviceType>(7)); }, "[device] unknown device type 7");
  expect_error([] { (void)zeros({2}, TensorOptions(bad<DType>(9))); }, "[TensorOptions] unknown dtype 9");
  expect_error([] { (void)ones({2}).to(bad<DType>(6)); }, "[to] unknown dtype 6");
  expect_error([] { (void)is_autocast_enabled(bad<DeviceType>(3)); }, "[autocast] unknown device type 3");
  expect_error([] { Autocast guard(bad<DeviceType>(2)); }, "[autocast] unknown device type 2");
  expect_error([] { Autocast guard(DeviceType::CPU, bad<DType>(200)); }, "unknown dtype 200");
  const Tensor x = ones({2, 3}), t = zeros({2, 3});
  expect_error([&] { mse_loss(x, t, bad<Reduction>(3)); }, "[mse_loss] unknown reduction 3 (expected 0 to 2)");
  expect_error([&] { l1_loss(x, t, bad<Reduction>(-1)); }, "[l1_loss] unknown reduction -1");
  expect_error([&] { cross_entropy(x, zeros({2}, kInt64), bad<Reduction>(5)); }, "[cross_entropy] unknown reduction 5");
  expect_error([&] { nll_loss(x, zeros({2}, kInt64), bad<Reduction>(5)); }, "[nll_loss] unknown reduction 5");
  expect_error([&] { binary_cross_entropy(sigmoid(x), t, bad<Reduction>(4)); }, "[binary_cross_entropy] unknown");
  expect_error([&] { pad(x, {1, 1}, bad<PadMode>(4)); }, "[pad] unknown mode 4 (expected 0 to 3)");
  expect_error([&] { gelu(x, bad<GeluApproximate>(2)); }, "[gelu] unknown approximation 2");
  expect_error([] { set_gemm_backend(bad<GemmBackend>(2)); }, "[set_gemm_backend] unknown backend 2");
  expect_error([] { set_conv_backend(bad<ConvBackend>(9)); }, "[set_conv_backend] unknown backend 9");
  expect_error([] { set_simd_level(bad<SimdLevel>(3)); }, "[set_simd_level] unknown level 3");
  const Tensor w = zeros({4, 4});
  expect_error([&] { nn::init::kaiming_uniform_(w, 0.0, bad<nn::init::FanMode>(2)); }, "[kaiming] unknown FanMode 2");
  nn::TransformerEncoderLayerOptions layer{8, 2, 16};
  layer.activation = bad<nn::FeedForwardActivation>(2);
  expect_error([&] { nn::TransformerEncoderLayer l(layer); }, "[TransformerEncoderLayer] unknown activation 2");
  nn::Linear lin(2, 2);
  optim::SGD sgd(lin.parameters(), optim::SGDOptions(0.1));
  expect_error([&] { optim::ReduceLROnPlateau s(sgd, optim::ReduceLROnPlateauOptions().mode(bad<optim::PlateauMode>(2))); },
               "[ReduceLROnPlateau] unknown mode 2");
  expect_error([&] {
    optim::ReduceLROnPlateau s(sgd, optim::ReduceLROnPlateauOptions().threshold_mode(bad<optim::ThresholdMode>(2)));
  }, "[ReduceLROnPlateau] unknown threshold_mode 2");
  expect_error([&] { optim::OneCycleLR s(sgd, 0.1, 10, optim::OneCycleLROptions().anneal_strategy(bad<optim::AnnealStrategy>(2))); },
               "[OneCycleLR] unknown anneal_strategy 2");
}

// As PyTorch's `x.grad = g`: the tensor's shape, dtype and device.
TEST(SetGrad, TakesOnlyAGradientOfTheTensorsShapeDtypeAndDevice) {
  const Tensor p = zeros({2, 3}, kBFloat16);
  expect_error([&] { p.set_grad(zeros({2, 3})); },
               "[set_grad] a gradient of float32 [2, 3] on cpu for a tensor of bfloat16 [2, 3] on cpu: the gradient "
               "must have the tensor's shape, dtype and device");
  expect_error([&] { p.set_grad(zeros({3, 2}, kBFloat16)); }, "[set_grad] a gradient of bfloat16 [3, 2]");
  p.set_grad(ones({2, 3}, kBFloat16));
  EXPECT_EQ(p.grad().dtype(), kBFloat16);
  p.set_grad(Tensor());
  EXPECT_FALSE(p.grad().defined());
}

// run_plan checks its plan as predicted_peak does: a gap would skip a layer, an overlap run one
// twice, silently.
TEST(RunPlan, RefusesPlansWithGapsOrOverlaps) {
  nn::ModuleList layers;
  for (int i = 0; i < 4; ++i) layers.add<nn::Linear>(3, 3);
  const utils::LayerChain chain(layers);
  const Tensor x = ones({2, 3});
  using Plan = utils::CheckpointPlan;
  expect_error([&] { utils::run_plan(chain, Plan{{{0, 2, true}, {3, 4, false}}}, x); },
               "[run_plan] segment [3,4) does not continue a plan that covers [0,2) of 4 layer(s)");
  expect_error([&] { utils::run_plan(chain, Plan{{{0, 3, true}, {2, 4, false}}}, x); },
               "[run_plan] segment [2,4) does not continue a plan that covers [0,3) of 4 layer(s)");
  expect_error([&] { utils::run_plan(chain, Plan{{{0, 2, false}}}, x); }, "[run_plan] the plan covers 2 layer(s) of 4");
  expect_error([&] { utils::run_plan(chain, Plan{{{0, 0, false}, {0, 4, false}}}, x); }, "segment [0,0)");
  expect_error([&] { utils::run_plan(chain, Plan{}, x); }, "[run_plan] the plan covers 0 layer(s) of 4");
  EXPECT_EQ(utils::run_plan(chain, Plan{{{0, 1, true}, {1, 4, false}}}, x).shape(), (Shape{2, 3}));
}

// einsum works out the size of its output and of each product before allocating it.
TEST(Einsum, RefusesATensorNoMachineCouldHoldBeforeAllocatingIt) {
  const Tensor a = ones({1 << 21});
  memory::reset_peak();
  const int64_t before = memory::stats().peak_bytes;
  const std::string message = testutil::error_of([&] { einsum("i,j,k->ijk", {a, a, a}); });
  EXPECT_NE(message.find("[einsum] equation 'i,j,k->ijk' needs an output of shape [2097152, 2097152, 2097152] in "
                         "float32, whose size overflows int64"),
            std::string::npos)
      << message;
  // [131072, 131072] float32 is 64 GiB: more than this machine (24 GiB) holds, so the product is
  // refused before it is made (where a machine holds that much the case does not apply).
  const int64_t machine = memory::physical_memory_bytes();
  if (machine > 0 && machine < (int64_t{1} << 36)) {
    const Tensor b = ones({1 << 17});
    expect_error([&] { einsum("i,j,ij->", {b, b, ones({1, 1})}); },
                 "[einsum] equation 'i,j,ij->' needs an intermediate product of shape [131072, 131072] in float32 "
                 "(64.00 GiB), more than this machine's");
  }
  EXPECT_LT(memory::stats().peak_bytes - before, int64_t{1} << 22);  // nothing large was allocated
  EXPECT_EQ(einsum("i,j->ij", {ones({3}), ones({2})}).shape(), (Shape{3, 2}));
}

// A 0-d tensor has no dim to index, but reductions accept dim 0 or -1 for it, as PyTorch does:
// they name the tensor itself (found by fuzz_op_table: count_of, keepdim_shape, transpose and
// Tensor::size indexed its empty shape).
TEST(ZeroDimTensors, DimZeroNamesTheTensorItself) {
  const Tensor x = scalar_tensor(3.0);
  EXPECT_EQ(sum(x, {0}).item(), 3.0);
  EXPECT_EQ(sum(x, {0}, true).dim(), 0);
  EXPECT_EQ(mean(x, {-1}).item(), 3.0);
  EXPECT_EQ(max(x, {0}).item(), 3.0);
  EXPECT_TRUE(std::isnan(var(x, {0}).item()));  // one value, correction 1: PyTorch's NaN
  EXPECT_EQ(var(x, {0}, 0).item(), 0.0);
  EXPECT_EQ(vector_norm(x, INFINITY, {0}).item(), 3.0);
  EXPECT_EQ(x.transpose(0, -1).item(), 3.0);
  expect_error([&] { x.transpose(0, 1); }, "[transpose] dim 1 is out of range for a tensor with 0 dim(s)");
  expect_error([&] { (void)x.size(0); }, "[size] dim 0 of a 0-d tensor: it has no dims");
  expect_error([&] { (void)x.stride(-1); }, "[stride] dim -1 of a 0-d tensor: it has no dims");
  expect_error([&] { sum(x, {0, -1}); }, "[sum] dim [0, -1] names a dim more than once");
  const Tensor leaf = scalar_tensor(2.0).requires_grad_();
  sum(leaf * leaf, {0}).backward();
  EXPECT_EQ(leaf.grad().item(), 4.0);
}

// The version a program reads is the one CMake's project() declares, which find_package compares.
TEST(Release, VersionIsCMakesProjectVersion) {
  EXPECT_EQ(ember::version(), EMBER_PROJECT_VERSION);
  EXPECT_EQ(std::count(ember::version().begin(), ember::version().end(), '.'), 2) << ember::version();
}

}  // namespace
