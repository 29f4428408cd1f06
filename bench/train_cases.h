#pragma once
// The training-step cases that bench_train (CPU, Google Benchmark) and bench_gpu (CUDA) time:
// the example programs' models (examples/models.h, examples/gpt.h) with their optimizers' default
// hyper-parameters, a fixed batch, and examples::fit's step less its bookkeeping.
// bench/compare_training.py and bench/compare_gpu.py rebuild the same cases in PyTorch.
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/autocast.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "examples/gpt.h"
#include "examples/models.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace ember::bench {

inline constexpr int64_t kClasses = 10;
// The GPT case: train_gpt's default model (4 blocks, d = 128, 4 heads, context 128, no dropout)
// over a 96-character vocabulary (the fortunes text has 96 distinct characters), batch 16.
inline constexpr int64_t kGptVocab = 96, kGptContext = 128;

// A model with its optimizer and its batch, as the example programs set them by default.
// `batch` is the examples per step (images, or windows of kGptContext tokens for the GPT).
// make_optimizer's flag is the optimizer's option `fused` (Note [Multi-tensor optimizer updates]).
struct ModelCase {
  std::string name;
  int64_t batch;
  std::function<std::unique_ptr<nn::Module>()> make;
  std::function<std::unique_ptr<optim::Optimizer>(nn::Module&, bool fused)> make_optimizer;
  std::function<std::pair<Tensor, Tensor>()> make_batch;  // (input, target) on the CPU
};

inline std::function<std::unique_ptr<optim::Optimizer>(nn::Module&, bool)> sgd(optim::SGDOptions options) {
  return [options](nn::Module& m, bool fused) {
    return std::make_unique<optim::SGD>(m.parameters(), optim::SGDOptions(options).fused(fused));
  };
}

// One randn [batch, 1, 28, 28] image batch and random labels.
inline std::pair<Tensor, Tensor> image_batch(int64_t batch) {
  Tensor x = randn({batch, 1, 28, 28});
  return {x, randint(0, kClasses, {batch})};
}

inline examples::GPTConfig gpt_config() {
  examples::GPTConfig c;
  c.vocab_size = kGptVocab;
  c.context = kGptContext;
  return c;
}

inline const ModelCase kModels[] = {
    {"mlp", 128, [] { return std::make_unique<examples::MLP>(0.2); }, sgd(optim::SGDOptions(0.05).momentum(0.9)),
     [] { return image_batch(128); }},
    {"resnet20", 128, [] { return std::make_unique<examples::ResNet20>(); },
     sgd(optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4)), [] { return image_batch(128); }},
    // train_gpt's AdamW: weight decay 0.1 on the Linear weights only, betas (0.9, 0.99).
    {"gpt", 16, [] { return std::make_unique<examples::GPT>(gpt_config()); },
     [](nn::Module& m, bool fused) {
       return std::make_unique<optim::AdamW>(examples::gpt_param_groups(
           m, optim::AdamWOptions(2e-3).betas({0.9, 0.99}).weight_decay(0.1).fused(fused)));
     },
     [] {
       Tensor ids = randint(0, kGptVocab, {16, kGptContext});
       return std::pair{ids, randint(0, kGptVocab, {16, kGptContext})};
     }},
};

// Everything one case needs, built before timing: the model (initialised with `seed`, 0 for the
// benchmarks) moved to `device`, its optimizer, and one batch (drawn on the CPU after the model,
// so every device times the same numbers).
struct Setup {
  std::unique_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  Tensor x, y;
  std::optional<DType> amp;  // the forward and the loss under autocast of this dtype (--amp)

  Setup(const ModelCase& m, Device device, bool fused_optimizer = true, uint64_t seed = 0) {
    manual_seed(seed);
    model = m.make();
    model->to(device);
    model->train();
    optimizer = m.make_optimizer(*model, fused_optimizer);
    auto [input, target] = m.make_batch();
    x = input.to(device);
    y = target.to(device);
  }

  // The step's forward and loss, under autocast of `amp` when set (the backward and the step run
  // outside the region, as examples::fit's). The logits are [batch, classes] or, for the GPT,
  // [batch, context, vocab]: cross-entropy over every position.
  Tensor loss() const {
    std::optional<Autocast> autocast;
    if (amp) autocast.emplace(x.device().type, *amp);
    const Tensor logits = (*model)(x);
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  }

  // examples::fit's step, less its bookkeeping; returns the loss. Adds the wall time of the
  // optimizer step to `optimizer_seconds` when given (on the CPU, where the step is synchronous).
  Tensor train_step(double* optimizer_seconds = nullptr) {
    const Tensor loss = this->loss();
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
