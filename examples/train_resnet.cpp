// Trains a ResNet-20-style network on Fashion-MNIST: SGD with momentum and weight decay, a cosine
// learning-rate schedule, random crops and flips. Optionally with activation checkpointing:
//   --checkpoint none       every activation kept (default)
//   --checkpoint blocks     each BasicBlock but the last checkpointed (utils::checkpoint_modules)
//   --checkpoint sqrt       the nine blocks in sqrt(9) = 3 segments (utils::checkpoint_sequential)
//   --checkpoint budget=MB  segments chosen by the planner to fit a training step into MB
// Data-parallel over processes: mpirun -np 2 ./train_resnet --distributed (examples/distributed_training.h).
// --amp bf16|fp16 trains under autocast (Note [Mixed-precision training steps] in examples/training.h).
// The last line printed is machine-readable (result test_acc=... peak_bytes=... step_ms=... amp=...).
#include <cstdio>

#include "examples/checkpoint_mode.h"
#include "examples/distributed_training.h"
#include "examples/models.h"
#include "examples/training.h"
#include "optim/sgd.h"

using namespace ember;

int main(int argc, char** argv) {
  examples::ensure_passive_openmp_wait(argv);
  CLI::App app{"Train a ResNet-20-style network on Fashion-MNIST"};
  examples::TrainConfig config;
  config.lr = 0.1;
  double momentum = 0.9, weight_decay = 5e-4;
  bool augment = true;
  std::string checkpoint = "none";
  bool distributed = false;
  examples::add_common_flags(app, config);
  examples::add_distributed_flag(app, distributed);
  app.add_option("--momentum", momentum, "SGD momentum")->check(examples::kNonNegative)->capture_default_str();
  app.add_option("--weight-decay", weight_decay, "SGD weight decay")
      ->check(examples::kNonNegative)
      ->capture_default_str();
  app.add_option("--augment", augment, "random crops and flips")->capture_default_str();
  app.add_option("--checkpoint", checkpoint, "none, blocks, sqrt, budget=MB or auto (from --memory-limit)")
      ->capture_default_str();
  return examples::run_main(app, argc, argv, "train_resnet", [&] {
    examples::CheckpointMode mode = examples::parse_checkpoint_mode(checkpoint, "train_resnet");
    examples::DistributedTraining ranks(distributed, config, app);
    const Device device = examples::setup(config);
    examples::Loaders data = examples::fashion_mnist_loaders(config, augment);
    examples::ResNet20 model;
    model.to(device);
    optim::SGD optimizer(model.parameters(),
                         optim::SGDOptions(config.lr).momentum(momentum).weight_decay(weight_decay));
    optim::CosineAnnealingLR schedule(optimizer, config.epochs * data.train->size());
    Tensor sample = randn({config.batch_size, 1, 28, 28}, TensorOptions(kFloat32).with_device(device));
    mode.to_come = examples::bytes_to_come(optimizer, *data.train,
                                           static_cast<int64_t>(sample.nbytes()) + config.batch_size * 8, device);
    examples::Forward forward = ranks.wrap(model, [&] {
      const examples::AmpScope autocast(config.amp, device);  // budget=MB profiles the step in its dtypes
      return examples::checkpointed_forward(
          {model, model.blocks, [&model](const Tensor& x) { return model.stem_forward(x); },
           [&model](const Tensor& h) { return model.head_forward(h); }},
          mode, sample);
    }());
    sample = Tensor();
    examples::RunResult r =
        examples::fit(model, forward, optimizer, &schedule, *data.train, *data.test, config, "train_resnet");
    if (config.main_process())
      std::printf("%s\n", examples::result_line(r, "model=resnet20 checkpoint=" + checkpoint).c_str());
  });
}
