// nn: the Module registry, Sequential, every layer's forward/gradients, BatchNorm statistics,
// Dropout, initialisation, and the errors for wrong inputs and mismatched state dicts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/recompute.h"
#include "core/generator.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "utils/checkpoint_sequential.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::values;
using autograd::gradcheck;

namespace {

struct Net : nn::Module {
  nn::Linear fc1{4, 8}, fc2{8, 3};
  nn::Dropout drop{0.5};
  nn::BatchNorm1d bn{8};
  Net() {
    register_module("fc1", fc1);
    register_module("bn", bn);
    register_module("drop", drop);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(drop(relu(bn(fc1(x))))); }
};

// Checks the gradients of a module's output w.r.t. its input and every parameter (float64).
void expect_module_gradcheck(nn::Module& m, const Tensor& input) {
  m.to(kFloat64);
  std::vector<Tensor> inputs{input.to(kFloat64).detach().requires_grad_()};
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  auto result = gradcheck([&](const std::vector<Tensor>&) { return m(inputs[0]); }, inputs);
  EXPECT_TRUE(result.ok) << m.name() << ": " << result.message;
}

}  // namespace

TEST(Module, RegistryNamesLikePyTorch) {
  Net net;
  std::vector<std::string> names;
  for (auto& [name, t] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight", "fc2.bias"}));
  std::vector<std::string> buffers;
  for (auto& [name, t] : net.named_buffers()) buffers.push_back(name);
  EXPECT_EQ(buffers, (std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}));
  EXPECT_EQ(net.children().size(), 4u);
  EXPECT_EQ(net.named_modules().size(), 5u);
  EXPECT_EQ(net.state_dict().size(), 9u);
  EXPECT_TRUE(net.fc1.weight.is_same(net.parameters()[0]));
  EXPECT_TRUE(net.fc1.weight.requires_grad());
  EXPECT_FALSE(net.bn.running_mean.requires_grad());
}

TEST(Module, TrainEvalPropagates) {
  Net net;
  EXPECT_TRUE(net.drop.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.drop.is_training());
  EXPECT_FALSE(net.bn.is_training());
  net.train();
  EXPECT_TRUE(net.bn.is_training());
}

TEST(Module, ZeroGradAndToKeepHandles) {
  Net net;
  Tensor x = randn({5, 4});
  sum(net(x)).backward();
  EXPECT_TRUE(net.fc1.weight.grad().defined());
  net.zero_grad(false);
  EXPECT_EQ(sum(abs(net.fc1.weight.grad())).item(), 0.0);
  net.zero_grad();
  EXPECT_FALSE(net.fc1.weight.grad().defined());
  Tensor handle = net.fc2.weight;
  net.to(kFloat64);
  EXPECT_EQ(handle.dtype(), kFloat64);  // the same impl was converted
  EXPECT_EQ(net.bn.num_batches_tracked.dtype(), kInt64);
  EXPECT_EQ(net(randn({5, 4}, kFloat64)).dtype(), kFloat64);
}

// Freezing part of a model for fine-tuning: its parameters get no gradient, the rest do, and an
// optimizer over all of them steps only those with one.
TEST(Module, RequiresGradFreezesAndUnfreezesASubmodule) {
  Net net;
  EXPECT_EQ(&net.fc1.requires_grad_(false), &net.fc1);
  EXPECT_FALSE(net.fc1.weight.requires_grad());
  EXPECT_FALSE(net.fc1.bias.requires_grad());
  const Tensor frozen = net.fc1.weight.detach().clone();
  optim::SGD sgd(net.parameters(), optim::SGDOptions(0.1));
  sum(net(randn({5, 4}))).backward();
  EXPECT_FALSE(net.fc1.weight.grad().defined());
  EXPECT_TRUE(net.fc2.weight.grad().defined());
  sgd.step();
  EXPECT_TRUE(testutil::bitwise_equal(net.fc1.weight, frozen));
  net.requires_grad_();
  EXPECT_TRUE(net.fc1.weight.requires_grad());
}

TEST(Module, StateDictRoundTripAndErrors) {
  manual_seed(1);
  Net a;
  manual_seed(2);
  Net b;
  EXPECT_NE(values(a.fc1.weight), values(b.fc1.weight));
  Tensor handle = b.fc1.weight;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(values(a.fc1.weight), values(b.fc1.weight));
  EXPECT_TRUE(handle.is_same(b.fc1.weight));
  EXPECT_NE(a.fc1.weight.storage(), b.fc1.weight.storage());  // copied, not shared

  nn::StateDict partial = a.state_dict();
  partial.erase("fc2.bias");
  partial["extra.weight"] = zeros({1});
  partial["fc1.weight"] = zeros({3, 3});
  expect_error([&] { b.load_state_dict(partial); },
               "[Net] load_state_dict failed:\n  missing keys: fc2.bias\n  unexpected keys: extra.weight\n"
               "  shape mismatches: fc1.weight: checkpoint [3, 3] vs model [8, 4]");
  partial["fc1.weight"] = zeros({8, 4});
  b.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(sum(abs(b.fc1.weight)).item(), 0.0);
}

TEST(Module, RegistrationErrors) {
  struct Bad : nn::Module {
  } m;
  m.register_parameter("w", zeros({2}));
  expect_error([&] { m.register_buffer("w", zeros({2})); }, "[Bad] the name 'w' is already registered");
  expect_error([&] { m.register_parameter("a.b", zeros({2})); }, "[Bad] invalid name 'a.b'");
  expect_error([&] { m(zeros({2})); }, "[Bad] this module has no one-tensor forward()");
}

TEST(Module, ApplyVisitsChildrenBeforeTheirParent) {
  Net net;
  std::vector<std::string> order;
  nn::Module& returned = net.apply([&](nn::Module& m) { order.push_back(m.name()); });
  EXPECT_EQ(&returned, &net);
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "BatchNorm1d", "Dropout", "Linear", "Net"}));
  nn::Sequential outer;
  outer.add<nn::Linear>(2, 2);
  outer.add<nn::Sequential>().add<nn::ReLU>();
  std::vector<nn::Module*> visited;
  outer.apply([&](nn::Module& m) { visited.push_back(&m); });
  EXPECT_EQ(visited, (std::vector<nn::Module*>{&outer[0], &outer.at<nn::Sequential>(1)[0], &outer[1], &outer}));
  // The common use: re-initialise every layer of one type, wherever it sits.
  net.apply([](nn::Module& m) {
    if (auto* fc = dynamic_cast<nn::Linear*>(&m)) {
      NoGradGuard no_grad;
      fc->weight.fill_(0.5);
      fc->bias.zero_();
    }
  });
  for (const Tensor& w : {net.fc1.weight, net.fc2.weight})
    for (double v : values(w)) EXPECT_EQ(v, 0.5);
  for (double v : values(net.fc2.bias)) EXPECT_EQ(v, 0.0);
  for (double v : values(net.bn.weight)) EXPECT_EQ(v, 1.0);  // BatchNorm untouched
}

TEST(Module, ForwardHooksReplaceInputAndOutputInOrderAndCanBeRemoved) {
  nn::Linear fc(3, 2);
  std::vector<std::string> log;
  auto doubled = fc.register_forward_pre_hook([&](nn::Module& m, const Tensor& in) {
    log.push_back("pre1 " + m.name());
    return in * 2.0;
  });
  fc.register_forward_pre_hook([&](nn::Module&, const Tensor& in) {
    log.push_back("pre2 " + std::to_string(in.size(0)));
    return Tensor();  // keep
  });
  Tensor seen_input, seen_output;
  auto shifted = fc.register_forward_hook([&](nn::Module&, const Tensor& in, const Tensor& out) {
    log.push_back("post1");
    seen_input = in;
    seen_output = out;
    return out + 1.0;
  });
  fc.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) {
    log.push_back("post2");
    return out * 3.0;  // sees post1's result
  });
  Tensor x = randn({4, 3});
  Tensor y = fc(x);
  EXPECT_EQ(log, (std::vector<std::string>{"pre1 Linear", "pre2 4", "post1", "post2"}));
  EXPECT_EQ(values(seen_input), values(x * 2.0));            // the replaced input
  EXPECT_EQ(values(seen_output), values(fc.forward(x * 2.0)));  // forward's own output
  EXPECT_EQ(values(y), values((fc.forward(x * 2.0) + 1.0) * 3.0));
  sum(y).backward();  // the replacements are part of the graph
  EXPECT_EQ(values(fc.bias.grad()), std::vector<double>(2, 12.0));  // 4 rows * 3
  doubled.remove();
  shifted.remove();
  shifted.remove();  // twice is harmless
  log.clear();
  EXPECT_EQ(values(fc(x)), values(fc.forward(x) * 3.0));
  EXPECT_EQ(log, (std::vector<std::string>{"pre2 4", "post2"}));
  // forward() itself runs no hooks; only a call does.
  log.clear();
  fc.forward(x);
  EXPECT_TRUE(log.empty());
  expect_error([&] { fc.register_forward_hook(nn::Module::ForwardHook()); },
               "[Linear] register_forward_hook: the hook is empty");
  expect_error([&] { fc.register_forward_pre_hook(nn::Module::ForwardPreHook()); },
               "[Linear] register_forward_pre_hook: the hook is empty");
  expect_error([&] { fc.register_forward_hook(nn::Module::ForwardHookOnAll()); },
               "[Linear] register_forward_hook: the hook is empty");
  expect_error([&] { fc.register_forward_pre_hook(nn::Module::ForwardPreHookOnAll()); },
               "[Linear] register_forward_pre_hook: the hook is empty");
}

// A one-tensor layer is written as before the call path took several inputs: a Module with
// forward(const Tensor&), its one-tensor hooks, switched to checkpointing from outside.
struct Doubler : nn::Module {
  Tensor forward(const Tensor& x) override { return x * 2.0; }
};

TEST(Module, AOneTensorModuleIsWrittenAsBefore) {
  Doubler d;
  d.register_forward_hook([](nn::Module&, const Tensor&, const Tensor& out) { return out + 1.0; });
  Tensor x = randn({2, 2}).requires_grad_();
  Tensor plain = d(x);
  EXPECT_EQ(values(plain), values(x * 2.0 + 1.0));
  EXPECT_EQ(utils::checkpoint_modules<Doubler>(d), 1);
  Tensor checkpointed = d(x);
  EXPECT_EQ(values(checkpointed), values(plain));
  sum(checkpointed).backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(4, 2.0));
}

// Note [Modules with several inputs]: a layer with a mask, an optional tensor and a plain value,
// returning two tensors.
struct Gated : nn::MultiInputModule<Gated> {
  nn::Linear fc{3, 3};
  Gated() { register_module("fc", fc); }
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& mask, const Tensor& bias = Tensor(),
                                    double scale = 1.0) {
    Tensor h = fc(x) * scale;
    if (bias.defined()) h = h + bias;
    return {h * mask, h};
  }
};

TEST(Module, AModuleWithSeveralInputsIsCalledThroughItsHooks) {
  Gated g;
  Tensor x = randn({2, 3}), mask = ones({2, 3}), bias = randn({3});
  std::vector<size_t> seen_inputs, seen_outputs;
  Tensor seen_mask;
  g.register_forward_pre_hook([&](nn::Module&, const nn::Module::Tensors& in) -> std::optional<nn::Module::Tensors> {
    seen_inputs.push_back(in.size());
    seen_mask = in[1];
    return nn::Module::Tensors{in[0] * 2.0, in[1], in[2]};  // replaces x, keeps mask and bias
  });
  g.register_forward_hook([&](nn::Module&, const nn::Module::Tensors& in, const nn::Module::Tensors& out)
                              -> std::optional<nn::Module::Tensors> {
    seen_inputs.push_back(in.size());
    seen_outputs.push_back(out.size());
    return std::nullopt;
  });
  auto [masked, h] = g(x, mask, bias, 0.5);
  EXPECT_EQ(seen_inputs, (std::vector<size_t>{3, 3}));  // x, mask, bias: not the plain scale
  EXPECT_EQ(seen_outputs, (std::vector<size_t>{2}));
  EXPECT_EQ(values(seen_mask), values(mask));
  auto [direct_masked, direct_h] = g.forward(x * 2.0, mask, bias, 0.5);
  EXPECT_EQ(values(masked), values(direct_masked));
  EXPECT_EQ(values(h), values(direct_h));
}

TEST(Module, HooksSeeTheTensorsACallPasses) {
  // The hooks see the arguments given, as PyTorch's see the positional ones: an optional tensor
  // passed undefined is there, undefined; a default of forward()'s that the call leaves out is not.
  Gated g;
  Tensor x = randn({2, 3}), mask = ones({2, 3});
  std::vector<std::vector<bool>> seen;
  g.register_forward_pre_hook([&](nn::Module&, const nn::Module::Tensors& in) -> std::optional<nn::Module::Tensors> {
    std::vector<bool> defined;
    for (const Tensor& t : in) defined.push_back(t.defined());
    seen.push_back(defined);
    return std::nullopt;
  });
  g(x, mask, Tensor());
  g(x, mask);
  EXPECT_EQ(seen, (std::vector<std::vector<bool>>{{true, true, false}, {true, true}}));
  // One-tensor hooks would see only part of such a call: refused with the counts.
  g.register_forward_hook([](nn::Module&, const Tensor&, const Tensor&) { return Tensor(); });
  expect_error([&] { g(x, mask); }, "[Gated] register_forward_hook: a one-tensor hook on a call with 2 tensor "
                                    "input(s) and 2 output(s)");
}

TEST(Module, AHookReplacingTheWrongNumberOfTensorsIsRefused) {
  Gated g;
  g.register_forward_pre_hook([](nn::Module&, const nn::Module::Tensors& in) -> std::optional<nn::Module::Tensors> {
    return nn::Module::Tensors{in[0]};
  });
  expect_error([&] { g(randn({1, 3}), ones({1, 3})); },
               "[Gated] a forward pre-hook returned 1 inputs for a call with 2");
}

// A multi-input layer whose other inputs have defaults also works where one tensor is passed:
// in a Sequential, through a Module&.
struct Scaled : nn::MultiInputModule<Scaled> {
  Tensor forward(const Tensor& x, const Tensor& scale = Tensor()) { return scale.defined() ? x * scale : x * 3.0; }
};

TEST(Module, AMultiInputModuleWithDefaultsRunsInASequential) {
  nn::Sequential seq;
  seq.add<Scaled>();
  seq.add<Gated>();  // needs a mask: a one-tensor call is refused by name
  Tensor x = randn({2, 3});
  EXPECT_EQ(values(seq[0](x)), values(x * 3.0));
  expect_error([&] { seq(x); }, "[Gated] forward() takes more than one tensor: call the module with all of them");
  nn::Module& as_module = seq[0];
  EXPECT_EQ(values(as_module.forward(x)), values(x * 3.0));
}

TEST(Module, AHookHandleOutlivingItsModuleRemovesNothing) {
  autograd::HookHandle handle;
  {
    nn::ReLU relu;
    handle = relu.register_forward_hook([](nn::Module&, const Tensor&, const Tensor&) { return Tensor(); });
  }
  handle.remove();  // the module and its hooks are gone: nothing to do, nothing to crash
  SUCCEED();
}

struct MyNet : nn::Module {};
namespace outer::inner {
template <class T>
struct Wrapped : nn::Module {};
}  // namespace outer::inner

TEST(Module, NameIsTheTypeWithoutItsScopes) {
  EXPECT_EQ(nn::Linear(2, 2).name(), "Linear");
  EXPECT_EQ(nn::BatchNorm2d(2).name(), "BatchNorm2d");  // the dynamic type, not BatchNorm
  EXPECT_EQ(MyNet().name(), "MyNet");
  EXPECT_EQ(Net().name(), "Net");  // in an anonymous namespace
  struct Local : nn::Module {};
  EXPECT_EQ(Local().name(), "Local");  // inside a function
  EXPECT_EQ(outer::inner::Wrapped<nn::Linear>().name(), "Wrapped<ember::nn::Linear>");
  nn::Sequential seq;
  seq.add<MyNet>();
  const nn::Module& base = seq[0];
  EXPECT_EQ(base.name(), "MyNet");  // through a base reference
  EXPECT_EQ(seq.str(), "Sequential(\n  (0): MyNet()\n)");
}

// Note [Printing settings]: the text PyTorch prints for the same model (bar count_include_pad,
// which PyTorch leaves out).
TEST(Module, PrintsEveryLayersSettingsLikePyTorch) {
  struct SmallCnn : nn::Module {
    nn::Conv2d conv{nn::Conv2dOptions(1, 4, 3).padding(1).bias(false)};
    nn::Conv2d dilated{nn::Conv2dOptions(4, 4, {3, 1}).stride(2).dilation(2)};
    nn::BatchNorm2d bn{4, 1e-3, 0.2};
    nn::LeakyReLU act{0.2};
    nn::MaxPool2d pool{2};
    nn::AvgPool2d avg{Pair{3, 2}, Pair{1, 1}, Pair{1, 0}, /*count_include_pad=*/false};
    nn::AdaptiveAvgPool2d gap{1};
    nn::Flatten flat;
    nn::Dropout drop{0.25};
    nn::ModuleDict heads;
    SmallCnn() {
      for (auto [name, m] : std::initializer_list<std::pair<const char*, nn::Module*>>{
               {"conv", &conv}, {"dilated", &dilated}, {"bn", &bn}, {"act", &act}, {"pool", &pool},
               {"avg", &avg}, {"gap", &gap}, {"flat", &flat}, {"drop", &drop}, {"heads", &heads}})
        register_module(name, *m);
      heads.add<nn::Linear>("fc", 4, 3);
      heads.add<nn::GELU>("gelu");
      heads.add<nn::LayerNorm>("norm", Shape{3});
    }
  } model;
  std::ostringstream printed;
  printed << model;
  EXPECT_EQ(printed.str(),
            "SmallCnn(\n"
            "  (conv): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
            "  (dilated): Conv2d(4, 4, kernel_size=(3, 1), stride=(2, 2), dilation=(2, 2))\n"
            "  (bn): BatchNorm2d(4, eps=0.001, momentum=0.2, affine=True, track_running_stats=True)\n"
            "  (act): LeakyReLU(negative_slope=0.2)\n"
            "  (pool): MaxPool2d(kernel_size=2, stride=2, padding=0)\n"
            "  (avg): AvgPool2d(kernel_size=(3, 2), stride=1, padding=(1, 0), count_include_pad=False)\n"
            "  (gap): AdaptiveAvgPool2d(output_size=1)\n"
            "  (flat): Flatten(start_dim=1, end_dim=-1)\n"
            "  (drop): Dropout(p=0.25)\n"
            "  (heads): ModuleDict(\n"
            "    (fc): Linear(in_features=4, out_features=3, bias=True)\n"
            "    (gelu): GELU(approximate='none')\n"
            "    (norm): LayerNorm((3,), eps=1e-05, elementwise_affine=True)\n"
            "  )\n"
            ")");
}

// Note [Modules]: modules stay where they are built; a factory hands out a unique_ptr.
std::unique_ptr<nn::Sequential> make_mlp(int64_t in, int64_t hidden, int64_t out) {
  auto mlp = std::make_unique<nn::Sequential>();
  mlp->add<nn::Linear>(in, hidden);
  mlp->add<nn::ReLU>();
  mlp->add<nn::Linear>(hidden, out);
  return mlp;
}

TEST(Module, FactoriesHandOutModulesThatContainersAndModelsOwn) {
  static_assert(!std::is_move_constructible_v<nn::Linear> && !std::is_copy_constructible_v<nn::Linear>);
  std::unique_ptr<nn::Sequential> mlp = make_mlp(4, 8, 2);
  EXPECT_TRUE(mlp->at<nn::Linear>(0).weight.is_same(mlp->parameters()[0]));  // the registry survived the return
  EXPECT_EQ((*mlp)(randn({3, 4})).shape(), (Shape{3, 2}));

  struct Model : nn::Module {
    std::unique_ptr<nn::Sequential> body = make_mlp(4, 8, 4);
    nn::ModuleList blocks;
    nn::ModuleDict heads;
    Model() {
      register_module("body", *body);
      for (int i = 0; i < 2; ++i) blocks.push_back(make_mlp(4, 4, 4));
      heads.insert("out", make_mlp(4, 4, 2));
      register_module("blocks", blocks);
      register_module("heads", heads);
    }
    Tensor forward(const Tensor& x) override {
      Tensor h = (*body)(x);
      for (nn::Module& block : blocks) h = block(h);
      return heads["out"](h);
    }
  };
  auto model = std::make_unique<Model>();  // a model is built on the heap the same way
  EXPECT_EQ((*model)(randn({3, 4})).shape(), (Shape{3, 2}));
  std::vector<std::string> names;
  for (auto& [name, t] : model->named_parameters()) names.push_back(name);
  ASSERT_EQ(names.size(), 16u);
  EXPECT_EQ(names[0], "body.0.weight");
  EXPECT_EQ(names[4], "blocks.0.0.weight");
  EXPECT_EQ(names[12], "heads.out.0.weight");
  expect_error([&] { model->blocks.push_back(std::unique_ptr<nn::Sequential>()); },
               "[ModuleList] cannot hold an empty module");
}

TEST(Sequential, OwnsIndexesIteratesNests) {
  nn::Sequential seq;
  seq.add<nn::Linear>(4, 6);
  seq.add<nn::ReLU>();
  auto& inner = seq.add<nn::Sequential>();
  inner.add<nn::Linear>(6, 2);
  inner.add<nn::Tanh>();
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq[1].name(), "ReLU");
  EXPECT_EQ(seq.at<nn::Linear>(0).out_features, 6);
  int count = 0;
  for (nn::Module& m : seq) count += m.name().empty() ? 0 : 1;
  EXPECT_EQ(count, 3);
  std::vector<std::string> names;
  for (auto& [name, t] : seq.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.0.weight", "2.0.bias"}));
  Tensor y = seq(randn({3, 4}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_LE(max(abs(y)).item(), 1.0);
  expect_error([&] { seq[5]; }, "[Sequential] index 5 is out of range for 3 module(s)");
  expect_error([&] { seq.at<nn::Linear>(1); }, "[Sequential] child 1 is a ReLU, not the requested type");
  EXPECT_NE(seq.str().find("(2): Sequential(\n    (0): Linear(in_features=6, out_features=2, bias=True)"), std::string::npos)
      << seq.str();
}

TEST(Layers, LinearMatchesTheFormulaAndInitBounds) {
  nn::Linear fc(3, 2);
  Tensor x = randn({4, 3});
  Tensor expected = matmul(x, fc.weight.t()) + fc.bias;
  EXPECT_EQ(values(fc(x)), values(expected));
  const double bound = 1 / std::sqrt(3.0);
  nn::Linear big(100, 200);
  EXPECT_LE(max(abs(big.weight)).item(), 0.1 + 1e-6);
  EXPECT_GT(max(abs(big.weight)).item(), 0.09);  // fills the range +-1/sqrt(100)
  EXPECT_LE(max(abs(fc.bias)).item(), bound);
  nn::Linear no_bias(3, 2, false);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(no_bias.parameters().size(), 1u);
  expect_error([&] { fc(randn({4, 5})); }, "[Linear] expected input with last dim 3 (in_features), got shape [4, 5]");
  expect_module_gradcheck(fc, randn({2, 3}));
}

TEST(Layers, ActivationsAndFlatten) {
  Tensor x = randn({2, 3, 2, 2});
  EXPECT_EQ(values(nn::ReLU()(x)), values(relu(x)));
  EXPECT_EQ(values(nn::LeakyReLU(0.2)(x)), values(leaky_relu(x, 0.2)));
  EXPECT_EQ(values(nn::Sigmoid()(x)), values(sigmoid(x)));
  EXPECT_EQ(values(nn::Tanh()(x)), values(tanh(x)));
  EXPECT_EQ(values(nn::GELU()(x)), values(gelu(x)));
  nn::GELU tanh_gelu(GeluApproximate::Tanh);
  EXPECT_EQ(values(tanh_gelu(x)), values(gelu(x, GeluApproximate::Tanh)));
  EXPECT_EQ(tanh_gelu.str(), "GELU(approximate='tanh')");
  EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{2, 12}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).shape(), (Shape{6, 2, 2}));
}

TEST(Layers, DropoutScalesAndIsIdentityInEval) {
  manual_seed(5);
  nn::Dropout drop(0.25);
  Tensor x = ones({100000});
  Tensor y = drop(x);
  std::vector<double> v = values(y);
  int64_t zeros_count = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0.0 || std::fabs(e - 1 / 0.75) < 1e-6);
    zeros_count += e == 0.0;
  }
  EXPECT_NEAR(static_cast<double>(zeros_count) / 100000.0, 0.25, 0.01);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
  // the gradient goes through the kept elements with the same scale
  drop.train();
  Tensor w = ones({1000}).requires_grad_();
  Tensor out = drop(w);
  sum(out).backward();
  EXPECT_EQ(values(w.grad()), values(out.detach()));
  expect_error([] { nn::Dropout(1.5); }, "[Dropout] probability has to be between 0 and 1, but got 1.5");
}

TEST(Layers, DropoutReplaysWithTheGeneratorState) {
  nn::Dropout drop(0.5);
  Tensor x = randn({64});
  GeneratorState s = default_generator().state();
  Tensor a = drop(x);
  default_generator().set_state(s);
  Tensor b = drop(x);
  EXPECT_EQ(values(a), values(b));
}

TEST(Layers, BatchNormTrainingStatisticsAndRunningEstimates) {
  manual_seed(3);
  nn::BatchNorm2d bn(3, 1e-5, 0.1);
  Tensor x = randn({4, 3, 5, 5}) * 2.0 + 1.0;
  Tensor y = bn(x);
  // per channel the output has mean 0 and biased variance ~1
  Tensor m = mean(y, {0, 2, 3}), v = mean(y * y, {0, 2, 3});
  for (double e : values(m)) EXPECT_NEAR(e, 0.0, 1e-5);
  for (double e : values(v)) EXPECT_NEAR(e, 1.0, 1e-3);
  Tensor batch_mean = mean(x, {0, 2, 3});
  Tensor centered = x - batch_mean.reshape({1, 3, 1, 1});
  Tensor unbiased = sum(centered * centered, {0, 2, 3}) / (4 * 25 - 1.0);
  std::vector<double> rm = values(bn.running_mean), rv = values(bn.running_var);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(rm[c], 0.1 * batch_mean.at({c}), 1e-6);
    EXPECT_NEAR(rv[c], 0.9 + 0.1 * unbiased.at({c}), 1e-5);
  }
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
  // eval uses the running estimates
  bn.eval();
  Tensor z = bn(x);
  Tensor expected = (x - bn.running_mean.reshape({1, 3, 1, 1})) / sqrt(bn.running_var.reshape({1, 3, 1, 1}) + 1e-5);
  std::vector<double> zv = values(z), ev = values(expected);
  for (size_t i = 0; i < zv.size(); ++i) EXPECT_NEAR(zv[i], ev[i], 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
}

TEST(Layers, BatchNormLeavesStatisticsAloneWhileRecomputing) {
  nn::BatchNorm1d bn(4);
  Tensor x = randn({8, 4});
  {
    autograd::RecomputeGuard recomputing;
    bn(x);
  }
  EXPECT_EQ(values(bn.running_mean), std::vector<double>(4, 0.0));
  EXPECT_EQ(bn.num_batches_tracked.item(), 0.0);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
}

TEST(Layers, BatchNormGradcheck) {
  nn::BatchNorm1d bn1(3);
  expect_module_gradcheck(bn1, randn({5, 3}));
  nn::BatchNorm2d bn2(2);
  expect_module_gradcheck(bn2, randn({3, 2, 2, 3}));
  bn2.eval();
  expect_module_gradcheck(bn2, randn({3, 2, 2, 3}));
  nn::BatchNorm1d plain(3, 1e-5, 0.1, /*affine=*/false);
  EXPECT_TRUE(plain.parameters().empty());
  expect_module_gradcheck(plain, randn({4, 3, 2}));
}

TEST(Layers, BatchNormErrors) {
  nn::BatchNorm2d bn(3);
  expect_error([&] { bn(zeros({2, 3})); }, "[BatchNorm2d] expected 4-D input [N, C, H, W], got shape [2, 3]");
  expect_error([&] { bn(zeros({2, 4, 2, 2})); }, "[BatchNorm2d] expected input with 3 channels, got shape [2, 4, 2, 2]");
  expect_error([&] { bn(zeros({1, 3, 1, 1})); }, "[batch_norm] expected more than 1 value per channel when training");
  nn::BatchNorm1d bn1(3);
  expect_error([&] { bn1(zeros({2, 3, 4, 5})); }, "[BatchNorm1d] expected 2-D or 3-D input, got shape [2, 3, 4, 5]");
  // A call that fails leaves the statistics alone: nothing was normalised, nothing is counted.
  EXPECT_EQ(bn.num_batches_tracked.item(), 0.0);
  EXPECT_EQ(bn1.num_batches_tracked.item(), 0.0);

  const double inf = std::numeric_limits<double>::infinity();
  expect_error([] { nn::BatchNorm1d(3, -1e-5); }, "[BatchNorm] eps must be finite and > 0, got -1e-05");
  expect_error([] { nn::BatchNorm2d(3, 0.0); }, "[BatchNorm] eps must be finite and > 0, got 0");
  expect_error([&] { nn::BatchNorm2d(3, inf); }, "[BatchNorm] eps must be finite and > 0, got inf");
  expect_error([] { nn::BatchNorm1d(3, 1e-5, 1.5); }, "[BatchNorm] momentum must be in [0, 1], got 1.5");
  expect_error([] { nn::BatchNorm1d(3, 1e-5, std::nan("")); }, "[BatchNorm] momentum must be in [0, 1], got nan");
  Tensor x = randn({4, 3});
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, -1.0); },
               "[batch_norm] eps must be finite and > 0, got -1");
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, -0.1); },
               "[batch_norm] momentum must be in [0, 1], got -0.1");
}

TEST(Layers, ConstructorsCheckTheirOptions) {
  // A bad layer fails where it is built, with the words the functional op would use.
  expect_error([] { nn::Conv2d(nn::Conv2dOptions(3, 8, 3).stride(0)); }, "[Conv2d] stride must be >= 1, got [0, 0]");
  expect_error([] { nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(-1)); },
               "[Conv2d] padding must be >= 0, got [-1, -1]");
  expect_error([] { nn::Conv2d(nn::Conv2dOptions(3, 8, 3).dilation(int64_t{1} << 62)); },
               "[Conv2d] the window (kernel [3, 3], dilation [4611686018427387904, 4611686018427387904]) is too large");
  expect_error([] { nn::MaxPool2d(Pair{2, 2}, Pair{0, 1}); }, "[MaxPool2d] stride must be >= 1, got [0, 1]");
  expect_error([] { nn::AvgPool2d(Pair{2, 0}); }, "[AvgPool2d] kernel size must be >= 1, got [2, 0]");
  expect_error([] { nn::AvgPool2d(Pair{2, 2}, std::nullopt, Pair{-1, 0}); },
               "[AvgPool2d] padding must be >= 0, got [-1, 0]");
  expect_error([] { nn::AdaptiveAvgPool2d(Pair{0, 2}); }, "[AdaptiveAvgPool2d] output size must be >= 1, got [0, 2]");
  expect_error([] { nn::LeakyReLU(std::nan("")); }, "[LeakyReLU] negative_slope must be finite, got nan");
}

TEST(Layers, LossModules) {
  Tensor logits = randn({4, 5}), target = randint(0, 5, {4});
  nn::CrossEntropyLoss ce({Reduction::Sum, -100, 0.1});
  EXPECT_FLOAT_EQ(ce(logits, target).item(), cross_entropy(logits, target, Reduction::Sum, -100, 0.1).item());
  nn::MSELoss mse;
  EXPECT_FLOAT_EQ(mse(logits, logits * 2.0).item(), mean(logits * logits).item());
}

TEST(Init, KaimingAndXavierHaveTheRightSpread) {
  manual_seed(9);
  Tensor w = empty({256, 128});
  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::FanIn, "relu");
  EXPECT_NEAR(std::sqrt(mean(w * w).item()), std::sqrt(2.0 / 128), 0.002);
  nn::init::xavier_uniform_(w);
  const double bound = std::sqrt(6.0 / (128 + 256));
  EXPECT_LE(max(abs(w)).item(), bound);
  EXPECT_GT(max(abs(w)).item(), 0.99 * bound);
  Tensor conv = empty({16, 3, 3, 3});
  EXPECT_EQ(nn::init::fans_of(conv).fan_in, 27);
  EXPECT_EQ(nn::init::fans_of(conv).fan_out, 144);
  EXPECT_NEAR(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0), 1e-12);
  expect_error([] { nn::init::calculate_gain("swish"); }, "[init] unknown nonlinearity 'swish'");
  expect_error([] { nn::init::fans_of(zeros({3})); }, "[init] fan in and fan out need a tensor with at least 2 dims");
}

TEST(Functional, StatelessFormsMatchTheLayers) {
  namespace F = nn::functional;
  nn::Linear fc(3, 2);
  Tensor x = randn({4, 3});
  EXPECT_EQ(values(F::linear(x, fc.weight, fc.bias)), values(fc(x)));
  EXPECT_EQ(values(F::relu(x)), values(nn::ReLU()(x)));
  Tensor img = randn({1, 2, 4, 4});
  EXPECT_EQ(values(F::max_pool2d(img, {2, 2}, {2, 2})), values(nn::MaxPool2d(2)(img)));
}

// ---------------------------------------------------------------------------------------------
// ModuleList, ModuleDict and the transformer layers

TEST(ModuleList, OwnsIndexesIteratesAndNamesLikePyTorch) {
  struct Model : nn::Module {
    nn::ModuleList blocks;
    Model() {
      blocks.add<nn::Linear>(4, 4);
      blocks.push_back(std::make_unique<nn::LayerNorm>(4));
      register_module("blocks", blocks);
    }
  } model;
  EXPECT_EQ(model.blocks.size(), 2u);
  EXPECT_EQ(model.blocks[1].name(), "LayerNorm");
  EXPECT_EQ(model.blocks.at<nn::LayerNorm>(1).normalized_shape, (Shape{4}));
  std::vector<std::string> names;
  for (auto& [name, t] : model.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias"}));
  Tensor h = randn({2, 4});
  Tensor expected = model.blocks.at<nn::LayerNorm>(1)(model.blocks.at<nn::Linear>(0)(h));
  for (nn::Module& block : model.blocks) h = block(h);
  EXPECT_EQ(values(h), values(expected));
  model.eval();  // train()/eval() reach the owned children
  EXPECT_FALSE(model.blocks[0].is_training());
  // A list has no forward of its own: the model decides how its blocks run.
  expect_error([&] { model.blocks(h); }, "[ModuleList] this module has no one-tensor forward()");
  expect_error([&] { model.blocks[2]; }, "[ModuleList] index 2 is out of range for 2 module(s)");
  expect_error([&] { model.blocks.at<nn::Linear>(1); }, "[ModuleList] child 1 is a LayerNorm, not the requested type");
  expect_error([&] { model.blocks.append(nullptr); }, "[ModuleList] cannot hold an empty module");
  EXPECT_NE(model.str().find("(blocks): ModuleList(\n    (0): Linear(in_features=4, out_features=4, bias=True)\n"
                             "    (1): LayerNorm((4,), eps=1e-05, elementwise_affine=True)"),
            std::string::npos)
      << model.str();
}

TEST(ModuleDict, KeysInInsertionOrderRegisteredUnderTheirNames) {
  struct Model : nn::Module {
    nn::ModuleDict heads;
    Model() {
      heads.add<nn::Linear>("policy", 4, 3);
      heads.insert("value", std::make_unique<nn::Linear>(4, 1, /*bias=*/false));
      heads.insert("act", std::make_shared<nn::Tanh>());
      register_module("heads", heads);
    }
  } model;
  EXPECT_EQ(model.heads.size(), 3u);
  EXPECT_TRUE(model.heads.contains("value"));
  EXPECT_FALSE(model.heads.contains("Value"));
  EXPECT_EQ(model.heads.keys(), (std::vector<std::string>{"policy", "value", "act"}));
  EXPECT_EQ(model.heads.at<nn::Linear>("value").out_features, 1);
  std::vector<std::string> keys;
  for (auto& [key, t] : model.state_dict()) keys.push_back(key);  // std::map: sorted
  EXPECT_EQ(keys, (std::vector<std::string>{"heads.policy.bias", "heads.policy.weight", "heads.value.weight"}));
  std::vector<std::string> seen;
  for (auto [key, head] : model.heads) seen.push_back(key + "=" + head.name());
  EXPECT_EQ(seen, (std::vector<std::string>{"policy=Linear", "value=Linear", "act=Tanh"}));
  Tensor h = randn({2, 4});
  Tensor expected = tanh(model.heads.at<nn::Linear>("policy")(h));
  EXPECT_EQ(values(model.heads["act"](model.heads["policy"](h))), values(expected));
  model.eval();
  EXPECT_FALSE(model.heads["act"].is_training());
  expect_error([&] { model.heads["q"]; }, "[ModuleDict] no module under the key 'q' (keys: policy, value, act)");
  expect_error([&] { model.heads.at<nn::Tanh>("policy"); },
               "[ModuleDict] child 'policy' is a Linear, not the requested type");
  expect_error([&] { model.heads.add<nn::ReLU>("act"); }, "[ModuleDict] the name 'act' is already registered");
  expect_error([&] { model.heads.add<nn::ReLU>("a.b"); }, "[ModuleDict] invalid name 'a.b'");
  expect_error([&] { model.heads.insert("none", std::unique_ptr<nn::ReLU>()); },
               "[ModuleDict] cannot hold an empty module");
  EXPECT_EQ(model.heads.size(), 3u);  // the failed insertions left nothing behind
  expect_error([&] { model.heads(h); }, "[ModuleDict] this module has no one-tensor forward()");
  expect_error([&] { nn::ModuleDict()["x"]; }, "[ModuleDict] no module under the key 'x' (keys: none)");
}

TEST(Layers, LayerNormNormalisesTheTrailingDims) {
  nn::LayerNorm ln(Shape{2, 3}, 1e-3);
  EXPECT_EQ(ln.weight.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(ln.weight), std::vector<double>(6, 1.0));
  EXPECT_EQ(values(ln.bias), std::vector<double>(6, 0.0));
  Tensor x = randn({4, 2, 3}) * 3.0 + 1.0;
  EXPECT_EQ(values(ln(x)), values(layer_norm(x, {2, 3}, ln.weight, ln.bias, 1e-3)));
  // Every [2, 3] slice comes out with mean 0 and (biased) variance 1 / (1 + eps / var).
  Tensor rows = ln(x).reshape({4, 6});
  for (double m : values(mean(rows, {1}))) EXPECT_NEAR(m, 0.0, 1e-5);
  nn::LayerNorm plain(5, 1e-5, false);
  EXPECT_FALSE(plain.weight.defined());
  EXPECT_EQ(plain.parameters().size(), 0u);
  EXPECT_EQ(plain.str(), "LayerNorm((5,), eps=1e-05, elementwise_affine=False)");
  EXPECT_EQ(ln.str(), "LayerNorm((2, 3), eps=0.001, elementwise_affine=True)");
  expect_error([&] { ln(randn({4, 3, 2})); },
               "[layer_norm] normalized_shape [2, 3] must be the trailing dims of the input of shape [4, 3, 2]");
  expect_error([] { nn::LayerNorm(Shape{}); },
               "[LayerNorm] normalized_shape must be non-empty with positive dims, got []");
  expect_error([] { nn::LayerNorm(0); }, "[LayerNorm] normalized_shape must be non-empty with positive dims, got [0]");
  expect_error([] { nn::LayerNorm(4, 0.0); }, "[LayerNorm] eps must be finite and > 0, got 0");
  nn::LayerNorm small(3);
  expect_module_gradcheck(small, randn({2, 3}));
}

TEST(Layers, EmbeddingLooksUpRowsAndRefusesBadIds) {
  manual_seed(3);
  nn::Embedding table(10, 4);
  EXPECT_EQ(table.weight.shape(), (Shape{10, 4}));
  Tensor ids = from_vector<int64_t>({7, 0, 7}, {3}, TensorOptions(kInt64));
  Tensor rows = table(ids);
  EXPECT_EQ(rows.shape(), (Shape{3, 4}));
  EXPECT_EQ(values(rows.select(0, 0)), values(table.weight.select(0, 7)));
  EXPECT_EQ(values(rows.select(0, 1)), values(table.weight.select(0, 0)));
  EXPECT_EQ(table.str(), "Embedding(10, 4)");
  // N(0, 1) at first, as PyTorch's.
  nn::Embedding big(1000, 100);
  EXPECT_NEAR(mean(big.weight).item(), 0.0, 0.02);
  EXPECT_NEAR(stddev(big.weight.flatten(), {0}).item(), 1.0, 0.02);
  expect_error([&] { table(from_vector<int64_t>({3, 10}, {2}, TensorOptions(kInt64))); },
               "[embedding] id 10 is out of range for a table of 10 embeddings (weight shape [10, 4])");
  expect_error([&] { table(from_vector<int64_t>({-1}, {1}, TensorOptions(kInt64))); },
               "[embedding] id -1 is out of range");
  expect_error([&] { table(zeros({2})); }, "[embedding] indices must be int64, got float32");
  expect_error([] { nn::Embedding(0, 4); },
               "[Embedding] num_embeddings and embedding_dim must be positive, got 0 and 4");
}

TEST(Layers, EmbeddingPaddingRowStartsAtZeroAndDoesNotTrain) {
  manual_seed(5);
  nn::Embedding table(6, 3, /*padding_idx=*/-2);  // row 4, as PyTorch stores it
  EXPECT_EQ(table.padding_idx, 4);
  EXPECT_EQ(table.str(), "Embedding(6, 3, padding_idx=4)");
  EXPECT_EQ(values(table.weight.select(0, 4)), (std::vector<double>{0, 0, 0}));
  EXPECT_NE(values(table.weight.select(0, 3)), (std::vector<double>{0, 0, 0}));
  std::vector<std::string> keys;
  for (const auto& [key, t] : table.state_dict()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"weight"}));  // padding_idx is a setting, not state
  sum(table(from_vector<int64_t>({4, 1, 4}, {3}, TensorOptions(kInt64)))).backward();
  EXPECT_EQ(values(table.weight.grad().select(0, 4)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values(table.weight.grad().select(0, 1)), (std::vector<double>{1, 1, 1}));
  expect_error([] { nn::Embedding(6, 3, 6); }, "[Embedding] padding_idx 6 must lie in [-num_embeddings, num_embeddings) = [-6, 6)");
  expect_error([] { nn::Embedding(6, 3, -7); }, "[Embedding] padding_idx -7 must lie in");
}

// PyTorch's Embedding.from_pretrained: the given tensor's memory, frozen by default; a padding
// row keeps its values and, trained, gets no gradient.
TEST(Layers, EmbeddingFromPretrainedUsesTheGivenTableFrozen) {
  const Tensor vectors = arange(12, kFloat32).reshape({4, 3});
  const std::shared_ptr<nn::Embedding> frozen = nn::Embedding::from_pretrained(vectors);
  EXPECT_EQ(frozen->num_embeddings, 4);
  EXPECT_FALSE(frozen->weight.requires_grad());
  const Tensor ids = from_vector<int64_t>({2, 0}, {2}, TensorOptions(kInt64));
  EXPECT_EQ(values((*frozen)(ids)), (std::vector<double>{6, 7, 8, 0, 1, 2}));
  vectors.select(0, 2).fill_(-1.0);  // the same memory: the table sees it
  EXPECT_EQ(values((*frozen)(ids).select(0, 0)), (std::vector<double>{-1, -1, -1}));
  const std::shared_ptr<nn::Embedding> trained = nn::Embedding::from_pretrained(vectors, false, 0);
  EXPECT_TRUE(trained->weight.requires_grad());
  EXPECT_EQ(values(trained->weight.select(0, 0)), (std::vector<double>{0, 1, 2}));  // not zeroed
  sum((*trained)(ids)).backward();
  EXPECT_EQ(values(trained->weight.grad().select(0, 0)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values(trained->weight.grad().select(0, 2)), (std::vector<double>{1, 1, 1}));
  expect_error([] { nn::Embedding::from_pretrained(zeros({3})); },
               "[Embedding.from_pretrained] embeddings must be a 2-D floating tensor [num_embeddings, embedding_dim], "
               "got float32 of shape [3]");
  expect_error([] { nn::Embedding::from_pretrained(zeros({0, 3})); }, "have no rows or no columns");
  expect_error([] { nn::Embedding::from_pretrained(zeros({2, 3}), true, 2); }, "[Embedding] padding_idx 2 must lie in");
}

TEST(Layers, CausalSelfAttentionSplitsHeadsAndIsCausal) {
  manual_seed(4);
  nn::CausalSelfAttention attn(8, 2);
  EXPECT_EQ(attn.head_dim, 4);
  std::vector<std::string> names;
  for (auto& [name, t] : attn.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"qkv.weight", "qkv.bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(attn.qkv.weight.shape(), (Shape{24, 8}));

  // The formula written out head by head.
  Tensor x = randn({2, 5, 8});
  std::vector<Tensor> qkv = chunk(attn.qkv(x), 3, -1);
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < 2; ++h) {
    Tensor q = qkv[0].narrow(2, 4 * h, 4), k = qkv[1].narrow(2, 4 * h, 4), v = qkv[2].narrow(2, 4 * h, 4);
    Tensor scores = masked_fill(matmul(q, k.transpose(1, 2)) / 2.0, causal_mask(5) == 0.0, -INFINITY);
    heads.push_back(matmul(softmax(scores, -1), v));
  }
  Tensor expected = attn.out_proj(cat(heads, 2));
  testutil::expect_near(attn(x), values(expected), 1e-5);

  // Causal: changing the last position changes nothing before it.
  Tensor y = attn(x);
  Tensor x2 = x.clone();
  x2.narrow(1, 4, 1).fill_(3.0);
  Tensor y2 = attn(x2);
  EXPECT_EQ(values(y.narrow(1, 0, 4)), values(y2.narrow(1, 0, 4)));
  EXPECT_NE(values(y.narrow(1, 4, 1)), values(y2.narrow(1, 4, 1)));

  EXPECT_NE(attn.str().find("CausalSelfAttention(embed_dim=8, num_heads=2, dropout=0, causal=True\n"
                            "  (qkv): Linear(in_features=8, out_features=24, bias=True)"),
            std::string::npos)
      << attn.str();
  expect_error([] { nn::CausalSelfAttention(10, 3); },
               "[CausalSelfAttention] embed_dim 10 must be divisible by num_heads 3");
  expect_error([] { nn::CausalSelfAttention(8, 0); },
               "[CausalSelfAttention] embed_dim and num_heads must be positive, got 8 and 0");
  expect_error([] { nn::CausalSelfAttention(8, 2, 1.5); },
               "[CausalSelfAttention] dropout has to be between 0 and 1, but got 1.5");
  expect_error([&] { attn(randn({5, 8})); }, "[CausalSelfAttention] expected input [batch, seq, 8], got shape [5, 8]");
  expect_error([&] { attn(randn({2, 5, 6})); },
               "[CausalSelfAttention] expected input [batch, seq, 8], got shape [2, 5, 6]");
  expect_error([&] { attn.forward(x, ones({4, 4}, TensorOptions(kUInt8))); },
               "[causal_attn_mask] attn_mask of shape [4, 4] does not broadcast with [L, S] = [5, 5]");

  nn::CausalSelfAttention small(4, 2);
  expect_module_gradcheck(small, randn({2, 3, 4}));
}

TEST(Layers, CausalSelfAttentionDropoutIsTheOutputsAndOnlyInTraining) {
  manual_seed(6);
  nn::CausalSelfAttention attn(8, 2, 0.5);
  Tensor x = randn({2, 5, 8});
  attn.eval();
  Tensor plain = attn(x);
  attn.train();
  RngStateGuard keep;
  Tensor dropped = attn(x);
  // Each output element is either dropped or the eval output scaled by 1 / (1 - p).
  const std::vector<double> p = values(plain), d = values(dropped);
  int zeros_seen = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (d[i] == 0.0) ++zeros_seen;
    else EXPECT_NEAR(d[i], 2.0 * p[i], 1e-5);
  }
  EXPECT_GT(zeros_seen, 0);
}

TEST(Layers, TransformerBlockIsPreLayerNormResidual) {
  manual_seed(7);
  nn::TransformerBlock block(8, 2);
  std::vector<std::string> names;
  for (auto& [name, t] : block.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias",
                                             "attn.out_proj.weight", "attn.out_proj.bias", "ln2.weight", "ln2.bias",
                                             "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"}));
  EXPECT_EQ(block.mlp.at<nn::Linear>(0).out_features, 32);
  Tensor x = randn({2, 3, 8});
  Tensor h = x + block.attn(block.ln1(x));
  Tensor expected = h + block.mlp.at<nn::Linear>(2)(gelu(block.mlp.at<nn::Linear>(0)(block.ln2(h))));
  EXPECT_EQ(values(block(x)), values(expected));
  nn::TransformerBlock small(4, 2);
  expect_module_gradcheck(small, randn({1, 3, 4}));
}
