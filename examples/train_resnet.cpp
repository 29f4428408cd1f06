// Trains a ResNet-20-style network on Fashion-MNIST: SGD with momentum and weight decay, a cosine
// learning-rate schedule, random crops and flips. Optionally with activation checkpointing:
//   --checkpoint none       every activation kept (default)
//   --checkpoint blocks     each BasicBlock checkpointed (utils::checkpoint_modules)
//   --checkpoint sqrt       the nine blocks in sqrt(9) = 3 segments (utils::checkpoint_sequential)
//   --checkpoint budget=MB  segments chosen by the planner to fit MB of activations
// The last line printed is machine-readable (result test_acc=... peak_bytes=... step_ms=...).
#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "examples/models.h"
#include "examples/training.h"
#include "optim/sgd.h"
#include "utils/checkpoint_sequential.h"
#include "utils/planner.h"

using namespace ember;

namespace {

// The forward a training step runs, for each --checkpoint mode.
examples::Forward make_forward(examples::ResNet20& model, const std::string& mode, const Tensor& sample) {
  if (mode == "none") return [&model](const Tensor& x) { return model(x); };
  if (mode == "blocks") {
    utils::checkpoint_modules<nn::BasicBlock>(model);
    return [&model](const Tensor& x) { return model(x); };
  }
  if (mode == "sqrt") {
    const auto segments = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(model.blocks.size()))));
    return [&model, segments](const Tensor& x) {
      return model.head_forward(utils::checkpoint_sequential(model.blocks, segments, model.stem_forward(x)));
    };
  }
  if (mode.rfind("budget=", 0) == 0) {
    const auto budget = static_cast<int64_t>(std::stod(mode.substr(7)) * 1024 * 1024);
    // The stem in eval mode, so that profiling leaves its BatchNorm statistics alone (the
    // profile needs only the blocks' input shape; profile_layers itself has no side effects).
    model.eval();
    Tensor stem_out = model.stem_forward(sample).detach();
    model.train();
    auto layers = utils::profile_layers(model.blocks, stem_out);
    // The planner budgets the blocks' activations; the stem's output is kept either way.
    utils::CheckpointPlan plan = utils::plan_checkpoints(layers, budget);
    std::printf("checkpoint plan for %s: %s (predicted peak %s, recompute %.1f ms per step)\n",
                memory::format_bytes(budget).c_str(), plan.str().c_str(),
                memory::format_bytes(plan.predicted_peak_bytes).c_str(), plan.recompute_ms);
    return [&model, plan](const Tensor& x) {
      return model.head_forward(utils::run_plan(model.blocks, plan, model.stem_forward(x)));
    };
  }
  EMBER_FAIL("[train_resnet] unknown --checkpoint mode '", mode, "' (none, blocks, sqrt or budget=MB)");
}

}  // namespace

int main(int argc, char** argv) {
  examples::ensure_passive_openmp_wait(argv);
  CLI::App app{"Train a ResNet-20-style network on Fashion-MNIST"};
  examples::TrainConfig config;
  config.lr = 0.1;
  double momentum = 0.9, weight_decay = 5e-4;
  bool augment = true;
  std::string checkpoint = "none";
  examples::add_common_flags(app, config);
  app.add_option("--momentum", momentum, "SGD momentum")->capture_default_str();
  app.add_option("--weight-decay", weight_decay, "SGD weight decay")->capture_default_str();
  app.add_option("--augment", augment, "random crops and flips")->capture_default_str();
  app.add_option("--checkpoint", checkpoint, "none, blocks, sqrt or budget=MB")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = examples::setup(config);
    examples::Loaders data = examples::fashion_mnist_loaders(config, augment);
    examples::ResNet20 model;
    model.to(device);
    optim::SGD optimizer(model.parameters(),
                         optim::SGDOptions(config.lr).momentum(momentum).weight_decay(weight_decay));
    optim::CosineAnnealingLR schedule(optimizer, config.epochs * data.train->size());
    Tensor sample = randn({config.batch_size, 1, 28, 28}, TensorOptions(kFloat32).with_device(device));
    examples::Forward forward = make_forward(model, checkpoint, sample);
    sample = Tensor();
    examples::RunResult r =
        examples::fit(model, forward, optimizer, &schedule, *data.train, *data.test, config, "train_resnet");
    std::printf("%s\n", examples::result_line(r, "model=resnet20 checkpoint=" + checkpoint).c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "train_resnet: %s\n", e.what());
    return 1;
  }
  return 0;
}
