// PyTorch parity of every nn layer and of a full ResNet-style training step. The golden files are
// written by tests/fixtures/make_nn_fixtures.py (torch; see that script for the naming of the
// tensors in a file): each case loads the module's state_dict from the file into the ember module
// through load_state_dict (keys as PyTorch's), runs the same input forward and backward and
// compares the output, the gradients w.r.t. the input and every parameter, and the buffers
// (BatchNorm's running statistics) afterwards. Every parameter and buffer of the ember module has
// to be in the file and every one in the file has to exist in the module, so nothing is skipped
// silently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "tests/fixture.h"
#include "tests/parity.h"

using namespace ember;
using ember::testutil::Fixture;
using namespace ember::testutil;

namespace {

// kFloat32Tol (tests/parity.h) for outputs, losses, running statistics and gradients that do not
// pass through a batch normalisation: float32 noise of a few ulps, amplified a little by short sums.
// Gradients that pass through BatchNorm in training mode: 3x looser. There the input gradient is
//   dx = weight * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)),
// a difference of terms that nearly cancel, where mean(dy) and mean(dy * xhat) are reductions
// over the whole batch, scaled by invstd (large for a channel with a small spread). Rounding
// therefore leaves an absolute error of float32's epsilon times the size of the cancelled terms,
// not of dx, and the summation order of those reductions (and of the im2col convolutions around
// them) is free: it differs between ember and PyTorch and with the thread count. In the ResNet
// step the error compounds through five BatchNorms and the convolutions between them. Measured
// (OpenBLAS, 1 and 2 threads): ember's worst gradient element is within 5% of kFloat32Tol, and
// torch's own float32 gradients differ from its float64 ones by < 1e-6 of their largest element;
// the 3x margin is for other BLAS builds and thread counts, and is still far below a real mistake
// (a wrong or missing term moves a gradient by a sizeable fraction of its own size).
constexpr Tol kBatchNormGradTol{3e-5, 3e-4};


#define EXPECT_MATCHES(f, name, got, tol) EXPECT_TRUE(all_close(name, got, (f).get(name), tol))

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The tensors named <prefix><key> in the file, as a state dict keyed <key>.
nn::StateDict with_prefix(const Fixture& f, const std::string& prefix) {
  nn::StateDict out;
  for (const std::string& name : f.names())
    if (starts_with(name, prefix)) out[name.substr(prefix.size())] = f.get(name);
  return out;
}

// Names in the file that start with `prefix` but are not <prefix><one of keys>: tensors the
// module lacks (a misnamed parameter would otherwise go unchecked).
std::vector<std::string> unmatched(const Fixture& f, const std::string& prefix, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const std::string& name : f.names()) {
    if (!starts_with(name, prefix)) continue;
    bool found = false;
    for (const std::string& k : keys) found = found || name == prefix + k;
    if (!found) out.push_back(name);
  }
  return out;
}

std::vector<std::string> keys_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// Compares every parameter's gradient with grad.<name> and checks that the file has no other
// parameter gradient (grad.x, the input's, is the caller's).
void expect_param_grads(const Fixture& f, nn::Module& m, Tol tol) {
  for (const auto& [name, p] : m.named_parameters()) EXPECT_MATCHES(f, "grad." + name, p.grad(), tol);
  std::vector<std::string> keys = keys_of(m.named_parameters());
  keys.push_back("x");
  EXPECT_EQ(unmatched(f, "grad.", keys), std::vector<std::string>{}) << "gradients in " << f.path()
                                                                       << " of parameters the module lacks";
}

// Compares every buffer with <prefix><name> and checks that the file has no other buffer.
void expect_buffers(const Fixture& f, nn::Module& m, const std::string& prefix) {
  for (const auto& [name, b] : m.named_buffers()) EXPECT_MATCHES(f, prefix + name, b, kFloat32Tol);
  EXPECT_EQ(unmatched(f, prefix, keys_of(m.named_buffers())), std::vector<std::string>{})
      << "buffers in " << f.path() << " the module lacks";
}

// One forward of `m` on the file's x (after loading its state.*) and the gradients of
// (out * w).sum(); see make_nn_fixtures.py's layer_case().
// `forward` runs the module when it is not m(x) (an extra argument from the file).
void check_layer(const std::string& case_name, nn::Module& m, bool train, Tol grad_tol = kFloat32Tol,
                 const std::function<Tensor(const Fixture&, const Tensor&)>& forward = nullptr) {
  SCOPED_TRACE("case nn_" + case_name + ".txt");
  Fixture f = Fixture::load("nn_" + case_name + ".txt");
  m.load_state_dict(with_prefix(f, "state."));
  m.train(train);
  Tensor x = f.get("x").requires_grad_();
  Tensor out = forward ? forward(f, x) : m(x);
  EXPECT_MATCHES(f, "out", out, kFloat32Tol);
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES(f, "grad.x", x.grad(), grad_tol);
  expect_param_grads(f, m, grad_tol);
  expect_buffers(f, m, "after.");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Linear and Conv2d

TEST(NnParity, Linear) {
  nn::Linear with_bias(5, 4), without_bias(5, 4, false), on_3d(6, 3);
  check_layer("linear_bias", with_bias, true);
  check_layer("linear_nobias", without_bias, true);
  check_layer("linear_3d", on_3d, true);
}

TEST(NnParity, Conv2dStride1Padding1NoBias) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 4, 3).stride(1).padding(1).bias(false));
  check_layer("conv_s1p1", conv, true);
}

TEST(NnParity, Conv2dStride2WithBias) {
  nn::Conv2d conv(nn::Conv2dOptions(3, 4, 3).stride(2).padding(0));
  check_layer("conv_s2_bias", conv, true);
}

TEST(NnParity, Conv2dDilation2) {
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, 3).padding(2).dilation(2));
  check_layer("conv_dilation2", conv, true);
}

TEST(NnParity, Conv2dRectangular) {
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, Pair{2, 3}).stride(Pair{2, 1}).padding(Pair{1, 0}));
  check_layer("conv_rect", conv, true);
}

// ---------------------------------------------------------------------------------------------
// BatchNorm: training mode (batch statistics; running statistics and num_batches_tracked move)
// and eval mode (the loaded running statistics normalise; nothing moves).

TEST(NnParity, BatchNorm1dOn2dInput) {
  nn::BatchNorm1d train_bn(4), eval_bn(4);
  check_layer("bn1d_2d_train", train_bn, true, kBatchNormGradTol);
  check_layer("bn1d_2d_eval", eval_bn, false);
}

TEST(NnParity, BatchNorm1dOn3dInput) {
  nn::BatchNorm1d train_bn(3), eval_bn(3);
  check_layer("bn1d_3d_train", train_bn, true, kBatchNormGradTol);
  check_layer("bn1d_3d_eval", eval_bn, false);
}

TEST(NnParity, BatchNorm2d) {
  nn::BatchNorm2d train_bn(3), eval_bn(3);
  check_layer("bn2d_train", train_bn, true, kBatchNormGradTol);
  check_layer("bn2d_eval", eval_bn, false);
}

// Five training-mode forwards on different batches; the running statistics after each one.
void check_running_stats(const std::string& case_name, double momentum) {
  SCOPED_TRACE("case nn_" + case_name + ".txt");
  Fixture f = Fixture::load("nn_" + case_name + ".txt");
  nn::BatchNorm2d bn(3, 1e-5, momentum);
  bn.load_state_dict(with_prefix(f, "state."));
  bn.train();
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const std::string step = std::to_string(k);
    NoGradGuard no_grad;  // as the script: statistics move without autograd too
    Tensor out = bn(f.get("x." + step));
    EXPECT_MATCHES(f, "out." + step, out, kFloat32Tol);
    expect_buffers(f, bn, "after." + step + ".");
  }
}

TEST(NnParity, BatchNormRunningStatsMomentum01) { check_running_stats("bn_running_m0.1", 0.1); }
TEST(NnParity, BatchNormRunningStatsMomentum03) { check_running_stats("bn_running_m0.3", 0.3); }

// ---------------------------------------------------------------------------------------------
// Activations and Flatten

TEST(NnParity, Activations) {
  nn::ReLU relu_;
  nn::LeakyReLU leaky, leaky02(0.2);
  nn::Sigmoid sigmoid_;
  nn::Tanh tanh_;
  nn::GELU gelu_;
  check_layer("relu", relu_, true);
  check_layer("leaky_relu", leaky, true);
  check_layer("leaky_relu_0.2", leaky02, true);
  check_layer("sigmoid", sigmoid_, true);
  check_layer("tanh", tanh_, true);
  check_layer("gelu", gelu_, true);
}

TEST(NnParity, Flatten) {
  nn::Flatten flatten, flatten_0_2(0, 2);
  check_layer("flatten", flatten, true);
  check_layer("flatten_0_2", flatten_0_2, true);
}

// ---------------------------------------------------------------------------------------------
// Pooling

TEST(NnParity, MaxPool2d) {
  nn::MaxPool2d k3s2p1(Pair{3, 3}, Pair{2, 2}, Pair{1, 1}), k2(2);
  check_layer("maxpool_k3s2p1", k3s2p1, true);
  check_layer("maxpool_k2", k2, true);
}

TEST(NnParity, AvgPool2d) {
  nn::AvgPool2d k2(2);
  nn::AvgPool2d incl(Pair{3, 3}, Pair{2, 2}, Pair{1, 1}, true), excl(Pair{3, 3}, Pair{2, 2}, Pair{1, 1}, false);
  check_layer("avgpool_k2", k2, true);
  check_layer("avgpool_k3s2p1_incl", incl, true);
  check_layer("avgpool_k3s2p1_excl", excl, true);
}

TEST(NnParity, AdaptiveAvgPool2d) {
  nn::AdaptiveAvgPool2d to_1x1(1), to_2x3(Pair{2, 3});
  check_layer("adaptive_1x1", to_1x1, true);
  check_layer("adaptive_2x3", to_2x3, true);
}

// ---------------------------------------------------------------------------------------------
// Losses: out = loss(x, target), gradients of (out * w).sum().

void check_cross_entropy(const std::string& case_name, nn::CrossEntropyLossOptions options) {
  SCOPED_TRACE("case nn_" + case_name + ".txt");
  Fixture f = Fixture::load("nn_" + case_name + ".txt");
  nn::CrossEntropyLoss loss(options);
  Tensor x = f.get("x").requires_grad_();
  Tensor out = loss(x, f.get("target"));
  EXPECT_MATCHES(f, "out", out, kFloat32Tol);
  sum(out * f.get("w")).backward();
  EXPECT_MATCHES(f, "grad.x", x.grad(), kFloat32Tol);
}

TEST(NnParity, CrossEntropyLoss) {
  nn::CrossEntropyLossOptions mean_, smoothing, ignore, ignore_smoothing, sum_, none;
  smoothing.label_smoothing = 0.1;
  ignore.ignore_index = 1;
  ignore_smoothing.ignore_index = 1;
  ignore_smoothing.label_smoothing = 0.1;
  sum_.reduction = Reduction::Sum;
  sum_.label_smoothing = 0.1;
  none.reduction = Reduction::None;
  none.ignore_index = 1;
  none.label_smoothing = 0.1;
  check_cross_entropy("ce_mean", mean_);
  check_cross_entropy("ce_smoothing", smoothing);
  check_cross_entropy("ce_ignore", ignore);
  check_cross_entropy("ce_ignore_smoothing", ignore_smoothing);
  check_cross_entropy("ce_sum", sum_);
  check_cross_entropy("ce_none", none);
}

TEST(NnParity, MSELoss) {
  for (auto [reduction, case_name] : {std::pair{Reduction::Mean, "mse_mean"}, std::pair{Reduction::Sum, "mse_sum"},
                                      std::pair{Reduction::None, "mse_none"}}) {
    SCOPED_TRACE(std::string("case nn_") + case_name + ".txt");
    Fixture f = Fixture::load(std::string("nn_") + case_name + ".txt");
    nn::MSELoss loss(reduction);
    Tensor x = f.get("x").requires_grad_(), target = f.get("target").requires_grad_();
    Tensor out = loss(x, target);
    EXPECT_MATCHES(f, "out", out, kFloat32Tol);
    sum(out * f.get("w")).backward();
    EXPECT_MATCHES(f, "grad.x", x.grad(), kFloat32Tol);
    EXPECT_MATCHES(f, "grad.target", target.grad(), kFloat32Tol);
  }
}

// ---------------------------------------------------------------------------------------------
// Dropout: ember's generator differs from PyTorch's by design, so the mask cannot be compared;
// instead the output must be exactly x * mask / (1 - p) for the mask it drew, and the identity in
// eval mode.

TEST(NnParity, DropoutScalesTheKeptElements) {
  manual_seed(11);
  const double p = 0.3;
  nn::Dropout drop(p);
  // No zeros in x, so output == 0 identifies the dropped elements.
  Tensor x = (rand({64, 50}) + 0.5).requires_grad_();
  Tensor y = drop(x);
  Tensor mask = y != 0.0;
  Tensor expected = x.detach() * mask / (1.0 - p);
  EXPECT_TRUE(all_close("dropout(x) vs x * mask / (1 - p)", y, expected, {0.0, 1e-6}));
  // The fraction dropped is near p (3200 draws: p +- 0.03 is beyond 4 standard deviations).
  const double kept = mean(mask.to(kFloat32)).item<double>();
  EXPECT_NEAR(1.0 - kept, p, 0.03);
  // The gradient uses the same mask.
  Tensor w = randn({64, 50});
  sum(y * w).backward();
  EXPECT_TRUE(all_close("grad of dropout", x.grad(), w * mask / (1.0 - p), {0.0, 1e-6}));

  drop.eval();
  Tensor y_eval = drop(x);
  EXPECT_TRUE(all_close("dropout in eval mode", y_eval, x.detach(), {0.0, 0.0}));

  nn::Dropout all(1.0);  // as PyTorch: everything dropped, zeros rather than NaN
  EXPECT_TRUE(all_close("dropout(p=1)", all(x), zeros({64, 50}), {0.0, 0.0}));
}

// ---------------------------------------------------------------------------------------------
// A full training step of a small ResNet: forward in training mode, cross-entropy, backward,
// SGD(momentum, weight decay) step. Compares the logits, the loss, every parameter's gradient, the
// BatchNorm running statistics and every parameter after the step.

TEST(NnParity, ResNetTrainingStep) {
  Fixture f = Fixture::load("nn_resnet_step.txt");
  nn::Sequential model;
  model.add<nn::Conv2d>(nn::Conv2dOptions(1, 8, 3).padding(1).bias(false));
  model.add<nn::BatchNorm2d>(8);
  model.add<nn::ReLU>();
  model.add<nn::BasicBlock>(8, 8, 1);
  model.add<nn::BasicBlock>(8, 16, 2);
  model.add<nn::AdaptiveAvgPool2d>(int64_t{1});
  model.add<nn::Flatten>();
  model.add<nn::Linear>(16, 10);
  model.load_state_dict(with_prefix(f, "state."));
  model.train();

  optim::SGD opt(model.parameters(), optim::SGDOptions(f.get("lr").item<double>())
                                         .momentum(f.get("momentum").item<double>())
                                         .weight_decay(f.get("weight_decay").item<double>())
                                         .nesterov(false));
  opt.zero_grad();
  Tensor out = model(f.get("x"));
  Tensor loss = cross_entropy(out, f.get("target"));
  loss.backward();
  EXPECT_MATCHES(f, "out", out, kFloat32Tol);
  EXPECT_MATCHES(f, "loss", loss, kFloat32Tol);
  // Every gradient but the classifier's passes through at least one BatchNorm.
  expect_param_grads(f, model, kBatchNormGradTol);
  expect_buffers(f, model, "after.");

  opt.step();
  // p - lr * (grad + weight_decay * p): the gradient's error enters scaled by lr = 0.1, so the
  // parameters after the step match to float32's tolerance.
  for (const auto& [name, p] : model.named_parameters()) EXPECT_MATCHES(f, "step." + name, p, kFloat32Tol);
  EXPECT_EQ(unmatched(f, "step.", keys_of(model.named_parameters())), std::vector<std::string>{});
}

// ---------------------------------------------------------------------------------------------
// Transformer layers. The attention cases come from torch's own F.multi_head_attention_forward
// under ember's parameter names (make_nn_fixtures.py), so they pin the qkv layout and the head
// split as well as the values.

TEST(NnParity, LayerNorm) {
  nn::LayerNorm over_last(6), over_two(Shape{3, 4}, 1e-3), plain(5, 1e-5, false);
  check_layer("layer_norm_6", over_last, true);
  check_layer("layer_norm_3x4", over_two, true);
  check_layer("layer_norm_plain", plain, true);
}

TEST(NnParity, Embedding) {
  Fixture f = Fixture::load("nn_embedding.txt");
  nn::Embedding table(10, 4);
  table.load_state_dict(with_prefix(f, "state."));
  Tensor out = table(f.get("x"));
  EXPECT_MATCHES(f, "out", out, kFloat32Tol);
  sum(out * f.get("w")).backward();
  expect_param_grads(f, table, kFloat32Tol);
}

TEST(NnParity, CausalSelfAttention) {
  nn::CausalSelfAttention attn(8, 2);
  check_layer("mha_causal", attn, true);
}

TEST(NnParity, CausalSelfAttentionWithAMask) {
  nn::CausalSelfAttention attn(8, 4, 0.0, /*causal=*/false);
  check_layer("mha_mask", attn, true, kFloat32Tol,
              [&](const Fixture& f, const Tensor& x) { return attn.forward(x, f.get("mask").to(kUInt8)); });
}

// One whole GPT block, forward and backward: both LayerNorms, the attention, the MLP and the two
// residual additions.
TEST(NnParity, TransformerBlock) {
  nn::TransformerBlock block(8, 2);
  check_layer("transformer_block", block, true);
}
