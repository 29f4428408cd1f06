// bench_train: one training step of the example programs' models (bench/train_cases.h), float32
// on the CPU, as examples::fit runs it. bench/compare_training.py times the same cases in
// PyTorch, so keep the names stable:
//
//   train_step/mlp/128            MLP 784-512-512-10 (Dropout 0.2), batch 128, SGD lr 0.05 momentum 0.9
//   train_step/resnet20/128       ResNet20, batch 128, SGD lr 0.1 momentum 0.9 weight decay 5e-4
//   train_step/gpt/16             train_gpt's GPT (4 blocks, d 128, 4 heads), 16 windows of 128
//                                 random tokens, AdamW lr 2e-3 betas (0.9, 0.99), weight decay 0.1 on
//                                 the Linear weights; cross-entropy over every position
//   train_step_bf16/<model>/<batch>  the same step, its forward and loss under bfloat16 autocast
//                                 (as the examples' --amp bf16; backward and step outside it)
//   forward/<model>/<batch>       the model's forward alone, in training mode with autograd on
//                                 (records the graph, as a training forward does), then dropped
//   optimizer_step/<model>/<batch>  the optimizer step alone, over the gradients of one training
//                                 step (the parameters and buffers move on every step)
//
// A training step is what examples::fit does per batch: logits = model(x), cross_entropy,
// optimizer.zero_grad() (set to none), loss.backward(), optimizer.step(). fit's bookkeeping
// (loss.item(), the accuracy count, the progress bar, the LR scheduler) is left out. Inputs are
// fixed: one randn [128, 1, 28, 28] batch and random labels (the GPT: random token ids), drawn
// with seed 0; so is the model's initialisation (seed 0, before the inputs).
//
//   bench_train [--threads N] [--optimizer fused|composed] [Google Benchmark flags...]
//
// --threads N (default 1) is handled before benchmark::Initialize: ember::set_num_threads(N)
// (ember's OpenMP loops and OpenBLAS). --optimizer (default fused) sets the optimizer's `fused`, the
// fused step or the composed one (Note [Multi-tensor optimizer updates] in core/optimizer_step.h),
// for before/after timings with one build. Times are wall clock (UseRealTime), so Google
// Benchmark names the cases "<case>/real_time". The training and forward cases report images/s
// (items_per_second; windows/s for the GPT), the training cases the loss after the last timed step (final_loss) and the
// mean wall time of the optimizer step inside the training step (optimizer_ms). Run it
// with OMP_WAIT_POLICY=PASSIVE on a busy machine (Note [OpenMP wait policy] in
// examples/training.h).
//
// Before timing, each training and optimizer case takes one step and checks that the loss is
// finite and that every parameter got a gradient of its shape; a failure (or an ember::Error)
// marks the case as an error in the report instead of timing it.
#include <benchmark/benchmark.h>

#include <cmath>
#include <exception>
#include <iostream>
#include <optional>
#include <string>

#include "bench/bench_common.h"
#include "bench/train_cases.h"

namespace {

using ember::Tensor;
using ember::bench::check_step;
using ember::bench::kModels;
using ember::bench::ModelCase;
using ember::bench::Setup;

bool fused_optimizer = true;  // --optimizer

void train_step_case(benchmark::State& state, const ModelCase& m, std::optional<ember::DType> amp) {
  const std::string name = (amp ? "train_step_bf16/" : "train_step/") + m.name;
  try {
    Setup s(m, ember::kCPU, fused_optimizer);
    s.amp = amp;
    check_step(name, s);
    double optimizer_seconds = 0.0;
    const Tensor loss = ember::bench::time_steps(state, [&] { return s.train_step(&optimizer_seconds); });
    state.counters["final_loss"] = loss.defined() ? loss.item() : NAN;
    state.counters["optimizer_ms"] = 1e3 * optimizer_seconds / static_cast<double>(state.iterations());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetItemsProcessed(state.iterations() * m.batch);  // images (GPT: windows) per second
}

void optimizer_step_case(benchmark::State& state, const ModelCase& m) {
  try {
    Setup s(m, ember::kCPU, fused_optimizer);
    check_step("optimizer_step/" + m.name, s);
    const Tensor first = s.model->parameters().front();
    ember::bench::time_steps(state, [&s, &first] {
      s.optimizer->step();
      return first;
    });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void forward_case(benchmark::State& state, const ModelCase& m) {
  try {
    Setup s(m, ember::kCPU);
    ember::bench::time_steps(state, [&s] { return (*s.model)(s.x); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetItemsProcessed(state.iterations() * m.batch);
}

void register_all() {
  for (const ModelCase& m : kModels) {
    const std::string suffix = "/" + m.name + "/" + std::to_string(m.batch);
    benchmark::RegisterBenchmark(("train_step" + suffix).c_str(), train_step_case, m, std::nullopt)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("train_step_bf16" + suffix).c_str(), train_step_case, m, ember::kBFloat16)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("forward" + suffix).c_str(), forward_case, m)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("optimizer_step" + suffix).c_str(), optimizer_step_case, m)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

// Takes --optimizer fused|composed out of argv; false, having said why, when malformed.
bool take_optimizer_flag(int& argc, char** argv) {
  std::string value = "fused";
  if (!ember::bench::take_flag(argc, argv, "optimizer", value) || (value != "fused" && value != "composed")) {
    std::cerr << "bench_train: --optimizer expects fused or composed\n";
    return false;
  }
  fused_optimizer = value == "fused";
  benchmark::AddCustomContext("optimizer_step", value);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!ember::bench::setup_threads(argc, argv, "bench_train") || !take_optimizer_flag(argc, argv)) return 2;

  register_all();
  return ember::bench::run_benchmarks(argc, argv);
}
