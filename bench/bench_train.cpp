// bench_train: one training step of the example programs' models (examples/models.h), float32
// on the CPU, as examples::fit runs it. bench/compare_training.py times the same cases in
// PyTorch, so keep the names stable:
//
//   train_step/mlp/128        MLP 784-512-512-10 (Dropout 0.2), batch 128, SGD lr 0.05 momentum 0.9
//   train_step/resnet20/128   ResNet20, batch 128, SGD lr 0.1 momentum 0.9 weight decay 5e-4
//   forward/mlp/128           the model's forward alone, in training mode with autograd on
//   forward/resnet20/128      (records the graph, as a training forward does), then dropped
//
// A training step is what examples::fit does per batch: logits = model(x), cross_entropy,
// optimizer.zero_grad() (set to none), loss.backward(), optimizer.step(). fit's bookkeeping
// (loss.item(), the accuracy count, the progress bar, the LR scheduler) is left out. Inputs are
// fixed: one randn [128, 1, 28, 28] batch and random labels, drawn with seed 0; so is the model's
// initialisation (seed 0, before the inputs).
//
//   bench_train [--threads N] [Google Benchmark flags...]
//
// --threads N (default 1) is handled before benchmark::Initialize: ember::set_num_threads(N)
// (ember's OpenMP loops and OpenBLAS). Times are wall clock (UseRealTime), so Google Benchmark
// names the cases "<case>/real_time". Each case reports images/s (items_per_second) and the loss
// after the last timed step (final_loss). Run it with OMP_WAIT_POLICY=PASSIVE on a busy machine
// (Note [OpenMP wait policy] in examples/training.h).
//
// Before timing, each training case takes one step and checks that the loss is finite and that
// every parameter got a gradient of its shape; a failure (or an ember::Error) marks the case as
// an error in the report instead of timing it.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/generator.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "examples/models.h"
#include "optim/sgd.h"
#include "bench/bench_common.h"

namespace {

using ember::Tensor;
namespace examples = ember::examples;
namespace optim = ember::optim;

constexpr int64_t kBatch = 128, kClasses = 10;

// A model with its optimizer's hyper-parameters, as the example programs set them by default.
struct ModelCase {
  std::string name;
  std::function<std::unique_ptr<ember::nn::Module>()> make;
  optim::SGDOptions sgd;
};

const ModelCase kModels[] = {
    {"mlp", [] { return std::make_unique<examples::MLP>(0.2); }, optim::SGDOptions(0.05).momentum(0.9)},
    {"resnet20", [] { return std::make_unique<examples::ResNet20>(); },
     optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4)},
};

// Everything one case needs, built before timing.
struct Setup {
  std::unique_ptr<ember::nn::Module> model;
  std::unique_ptr<optim::SGD> optimizer;
  Tensor x, y;

  explicit Setup(const ModelCase& m) {
    ember::manual_seed(0);
    model = m.make();
    model->train();
    optimizer = std::make_unique<optim::SGD>(model->parameters(), m.sgd);
    x = ember::randn({kBatch, 1, 28, 28});
    y = ember::randint(0, kClasses, {kBatch});
  }

  // examples::fit's step, less its bookkeeping; returns the loss.
  Tensor train_step() {
    Tensor logits = (*model)(x);
    Tensor loss = ember::cross_entropy(logits, y);
    optimizer->zero_grad();
    loss.backward();
    optimizer->step();
    return loss;
  }
};

void check_step(const std::string& name, Setup& s) {
  const double loss = s.train_step().item();
  if (!std::isfinite(loss)) throw std::runtime_error(name + ": the loss of the first step is not finite");
  for (const Tensor& p : s.model->parameters())
    if (!p.grad().defined() || p.grad().shape() != p.shape())
      throw std::runtime_error(name + ": a parameter of shape " + ember::shape_str(p.shape()) +
                               " has no gradient of its shape after backward");
}

void train_step_case(benchmark::State& state, const ModelCase& m) {
  const std::string name = "train_step/" + m.name;
  try {
    Setup s(m);
    check_step(name, s);
    const Tensor loss = ember::bench::time_steps(state, [&s] { return s.train_step(); });
    state.counters["final_loss"] = loss.defined() ? loss.item() : NAN;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);  // images per second
}

void forward_case(benchmark::State& state, const ModelCase& m) {
  try {
    Setup s(m);
    ember::bench::time_steps(state, [&s] { return (*s.model)(s.x); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void register_all() {
  for (const ModelCase& m : kModels) {
    const std::string suffix = "/" + m.name + "/" + std::to_string(kBatch);
    benchmark::RegisterBenchmark(("train_step" + suffix).c_str(), train_step_case, m)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("forward" + suffix).c_str(), forward_case, m)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!ember::bench::setup_threads(argc, argv, "bench_train")) return 2;

  register_all();
  return ember::bench::run_benchmarks(argc, argv);
}
