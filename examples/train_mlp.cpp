// Trains a 784-512-512-10 MLP with ReLU and Dropout on Fashion-MNIST with SGD + momentum and a
// cosine learning-rate schedule.
//   ./train_mlp --epochs 10
//   mpirun -np 2 ./train_mlp --distributed   (data-parallel, examples/distributed_training.h)
//   ./train_mlp --amp bf16                    (mixed precision, Note [Mixed-precision training steps])
// Prints a progress bar per epoch, a summary, and last a machine-readable line:
//   result test_acc=... epochs=... wall_s=... images_per_s=... peak_bytes=... amp=... model=mlp
#include <cstdio>

#include "data/idx.h"
#include "examples/distributed_training.h"
#include "examples/models.h"
#include "examples/training.h"
#include "optim/sgd.h"

using namespace ember;

int main(int argc, char** argv) {
  examples::ensure_passive_openmp_wait(argv);
  CLI::App app{"Train a 784-512-512-10 MLP on Fashion-MNIST"};
  examples::TrainConfig config;
  config.lr = 0.05;
  double momentum = 0.9, dropout = 0.2;
  bool distributed = false;
  examples::add_common_flags(app, config);
  examples::add_distributed_flag(app, distributed);
  app.add_option("--momentum", momentum, "SGD momentum")->check(examples::kNonNegative)->capture_default_str();
  app.add_option("--dropout", dropout, "dropout probability after each hidden layer")->capture_default_str();
  return examples::run_main(app, argc, argv, "train_mlp", [&] {
    examples::DistributedTraining ranks(distributed, config, app);
    const Device device = examples::setup(config);
    examples::Loaders data = examples::fashion_mnist_loaders(config, /*augment=*/false);
    examples::MLP model(dropout);
    model.to(device);
    optim::SGD optimizer(model.parameters(), optim::SGDOptions(config.lr).momentum(momentum));
    optim::CosineAnnealingLR schedule(optimizer, config.epochs * data.train->size());
    const examples::Forward forward = ranks.wrap(model, [&](const Tensor& x) { return model(x); });
    examples::RunResult r =
        examples::fit(model, forward, optimizer, &schedule, *data.train, *data.test, config, "train_mlp");
    if (config.main_process()) std::printf("%s\n", examples::result_line(r, "model=mlp").c_str());
  });
}
