#pragma once
// The training-step cases that bench_train (CPU, Google Benchmark) and bench_gpu (CUDA) time:
// the example programs' models (examples/models.h) with their optimizers' default
// hyper-parameters, a fixed batch of 128, and examples::fit's step less its bookkeeping.
// bench/compare_training.py and bench/compare_gpu.py rebuild the same cases in PyTorch.
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/generator.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "examples/models.h"
#include "optim/sgd.h"

namespace ember::bench {

inline constexpr int64_t kBatch = 128, kClasses = 10;

// A model with its optimizer's hyper-parameters, as the example programs set them by default.
struct ModelCase {
  std::string name;
  std::function<std::unique_ptr<nn::Module>()> make;
  optim::SGDOptions sgd;
};

inline const ModelCase kModels[] = {
    {"mlp", [] { return std::make_unique<examples::MLP>(0.2); }, optim::SGDOptions(0.05).momentum(0.9)},
    {"resnet20", [] { return std::make_unique<examples::ResNet20>(); },
     optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4)},
};

// Everything one case needs, built before timing: the model (initialised with seed 0) moved to
// `device`, its optimizer, one randn [128, 1, 28, 28] batch and random labels (drawn on the CPU
// after the model, so every device times the same numbers).
struct Setup {
  std::unique_ptr<nn::Module> model;
  std::unique_ptr<optim::SGD> optimizer;
  Tensor x, y;

  Setup(const ModelCase& m, Device device) {
    manual_seed(0);
    model = m.make();
    model->to(device);
    model->train();
    optimizer = std::make_unique<optim::SGD>(model->parameters(), m.sgd);
    x = randn({kBatch, 1, 28, 28}).to(device);
    y = randint(0, kClasses, {kBatch}).to(device);
  }

  // examples::fit's step, less its bookkeeping; returns the loss. Adds the wall time of the
  // optimizer step to `optimizer_seconds` when given (on the CPU, where the step is synchronous).
  Tensor train_step(double* optimizer_seconds = nullptr) {
    Tensor logits = (*model)(x);
    Tensor loss = cross_entropy(logits, y);
    optimizer->zero_grad();
    loss.backward();
    const auto start = std::chrono::steady_clock::now();
    optimizer->step();
    if (optimizer_seconds)
      *optimizer_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return loss;
  }
};

// One step, then: the loss is finite and every parameter has a gradient of its shape. Throws
// std::runtime_error naming the case otherwise.
inline void check_step(const std::string& name, Setup& s) {
  const double loss = s.train_step().item();
  if (!std::isfinite(loss)) throw std::runtime_error(name + ": the loss of the first step is not finite");
  for (const Tensor& p : s.model->parameters())
    if (!p.grad().defined() || p.grad().shape() != p.shape())
      throw std::runtime_error(name + ": a parameter of shape " + shape_str(p.shape()) +
                               " has no gradient of its shape after backward");
}

}  // namespace ember::bench
