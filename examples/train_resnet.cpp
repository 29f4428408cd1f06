// Trains a ResNet-20-style network on Fashion-MNIST: SGD with momentum and weight decay, a cosine
// learning-rate schedule, random crops and flips. Optionally with activation checkpointing:
//   --checkpoint none       every activation kept (default)
//   --checkpoint blocks     each BasicBlock checkpointed (utils::checkpoint_modules)
//   --checkpoint sqrt       the nine blocks in sqrt(9) = 3 segments (utils::checkpoint_sequential)
//   --checkpoint budget=MB  segments chosen by the planner to fit MB of activations
// The last line printed is machine-readable (result test_acc=... peak_bytes=... step_ms=...).
#include <charconv>
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

// A --checkpoint mode, checked before any work is done.
struct CheckpointMode {
  std::string kind;          // none, blocks, sqrt or budget
  int64_t budget_bytes = 0;  // for budget
};

CheckpointMode parse_checkpoint_mode(const std::string& mode) {
  if (mode == "none" || mode == "blocks" || mode == "sqrt") return {mode};
  EMBER_CHECK(mode.starts_with("budget="), "[train_resnet] unknown --checkpoint mode '", mode,
              "' (none, blocks, sqrt or budget=MB)");
  const std::string text = mode.substr(7);
  double mb = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), mb);
  EMBER_CHECK(error != std::errc::result_out_of_range, "[train_resnet] --checkpoint ", mode, ": '", text,
              "' is out of range");
  EMBER_CHECK(error == std::errc() && end == text.data() + text.size(), "[train_resnet] --checkpoint ", mode,
              ": '", text, "' is not a number of MiB");
  return {"budget", examples::mib_to_bytes(mb, "train_resnet --checkpoint " + mode)};
}

// The forward a training step runs, for each --checkpoint mode.
examples::Forward make_forward(examples::ResNet20& model, const CheckpointMode& mode, const Tensor& sample) {
  if (mode.kind == "none") return [&model](const Tensor& x) { return model(x); };
  if (mode.kind == "blocks") {
    utils::checkpoint_modules<nn::BasicBlock>(model);
    return [&model](const Tensor& x) { return model(x); };
  }
  if (mode.kind == "sqrt") {
    const auto segments = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(model.blocks.size()))));
    return [&model, segments](const Tensor& x) {
      return model.head_forward(utils::checkpoint_sequential(model.blocks, segments, model.stem_forward(x)));
    };
  }
  const int64_t budget = mode.budget_bytes;
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
  app.add_option("--momentum", momentum, "SGD momentum")->check(examples::kNonNegative)->capture_default_str();
  app.add_option("--weight-decay", weight_decay, "SGD weight decay")
      ->check(examples::kNonNegative)
      ->capture_default_str();
  app.add_option("--augment", augment, "random crops and flips")->capture_default_str();
  app.add_option("--checkpoint", checkpoint, "none, blocks, sqrt or budget=MB")->capture_default_str();
  return examples::run_main(app, argc, argv, "train_resnet", [&] {
    const CheckpointMode mode = parse_checkpoint_mode(checkpoint);
    const Device device = examples::setup(config);
    examples::Loaders data = examples::fashion_mnist_loaders(config, augment);
    examples::ResNet20 model;
    model.to(device);
    optim::SGD optimizer(model.parameters(),
                         optim::SGDOptions(config.lr).momentum(momentum).weight_decay(weight_decay));
    optim::CosineAnnealingLR schedule(optimizer, config.epochs * data.train->size());
    Tensor sample = randn({config.batch_size, 1, 28, 28}, TensorOptions(kFloat32).with_device(device));
    examples::Forward forward = make_forward(model, mode, sample);
    sample = Tensor();
    examples::RunResult r =
        examples::fit(model, forward, optimizer, &schedule, *data.train, *data.test, config, "train_resnet");
    std::printf("%s\n", examples::result_line(r, "model=resnet20 checkpoint=" + checkpoint).c_str());
  });
}
