// bench_checkpoint: what activation checkpointing costs in time. One training step (zero_grad,
// forward, sum of the output, backward) of 16 x (Linear(1024, 1024) + ReLU) on a 1024 x 1024
// input, float32 on the CPU:
//
//   train_step/plain/16x1024x1024                        no checkpointing
//   train_step/segments4/16x1024x1024                    checkpoint_sequential, 4 segments
//   train_step/segments4_save_matmuls/16x1024x1024       the same with the save_matmuls policy
//   train_step/segments4_unchecked/16x1024x1024          4 segments without the value check
//                                                        (check_values = false)
//   forward/16x1024x1024                                 the forward alone, recording the graph
//                                                        as a training forward (and a recompute) does
//
// At the end it prints the recompute's cost in forwards, (checkpointed step - plain step) /
// forward, from each case's median wall-clock time and median CPU time. Non-reentrant
// checkpointing re-runs each checkpointed segment's forward at most once, so the ratio must come
// out at most 1 (3/4 here: the last of the 4 segments is not checkpointed). save_matmuls replays
// the matmuls and recomputes only the bias adds and ReLUs, so it should come out far lower. It
// also prints what the default value check (Note [Checking the recompute]) costs: the 4-segment
// step with it against the same step without it.
// Memory is the demo's subject (examples/checkpoint_demo); here each case only reports its exact
// peak as a counter.
//
//   bench_checkpoint [--threads N] [Google Benchmark flags...]
//   e.g. bench_checkpoint --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//
// --threads N (default 1) as in bench_core. The reported times are wall clock (UseRealTime).
// Before timing, each checkpointed case checks that its gradients equal the plain step's bit for
// bit. Results: bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "utils/checkpoint.h"
#include "utils/checkpoint_sequential.h"
#include "bench/bench_common.h"

namespace {

using ember::Tensor;

constexpr int64_t kLayers = 16, kBatch = 1024, kWidth = 1024, kSegments = 4;
const std::string kDims = std::to_string(kLayers) + "x" + std::to_string(kBatch) + "x" + std::to_string(kWidth);

// The model and input, shared by every case (built once, in main).
struct Stack {
  ember::nn::Sequential seq;
  Tensor x;
  Stack() {
    for (int64_t i = 0; i < kLayers; ++i) {
      seq.add<ember::nn::Linear>(kWidth, kWidth);
      seq.add<ember::nn::ReLU>();
    }
    x = ember::randn({kBatch, kWidth});
  }
};
Stack* stack = nullptr;

using Forward = std::function<Tensor(ember::nn::Sequential&, const Tensor&)>;

Tensor plain_forward(ember::nn::Sequential& seq, const Tensor& x) { return seq(x); }

Forward segments_forward(const ember::utils::CheckpointOptions& options) {
  return [options](ember::nn::Sequential& seq, const Tensor& x) {
    return ember::utils::checkpoint_sequential(seq, kSegments, x, options);
  };
}

// One training step; returns a gradient so the work cannot be optimised away.
Tensor train_step(const Forward& forward) {
  stack->seq.zero_grad();  // set_to_none: the backward allocates the gradients, as in training
  ember::sum(forward(stack->seq, stack->x)).backward();
  return stack->seq.parameters().front().grad();
}

std::vector<std::vector<float>> gradients(const Forward& forward) {
  train_step(forward);
  std::vector<std::vector<float>> out;
  for (const Tensor& p : stack->seq.parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

// Runs `step` once outside the timing to measure its exact peak (and warm the allocator's cache),
// then times it.
void run_case(benchmark::State& state, const std::function<Tensor()>& step, const std::function<void()>& check) {
  try {
    if (check) check();
    stack->seq.zero_grad();  // the previous case's gradients must not count as "before"
    const int64_t before = ember::memory::stats().live_bytes;
    ember::memory::reset_peak();
    step();
    state.counters["peak_MiB"] =
        static_cast<double>(ember::memory::stats().peak_bytes - before) / (1024.0 * 1024.0);
    ember::bench::time_steps(state, step);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The checkpointed gradients must be the plain ones, bit for bit (the recompute is the same
// arithmetic in the same order).
std::function<void()> same_gradients_as_plain(const Forward& forward) {
  return [forward] {
    if (gradients(forward) != gradients(plain_forward))
      throw std::runtime_error("gradients differ from the plain step's");
  };
}

void add(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(fn))->UseRealTime()->Unit(benchmark::kMillisecond);
}

const std::string kPlain = "train_step/plain/" + kDims, kSegmented = "train_step/segments4/" + kDims,
                  kSaveMatmuls = "train_step/segments4_save_matmuls/" + kDims,
                  kUnchecked = "train_step/segments4_unchecked/" + kDims, kForward = "forward/" + kDims;

void register_all() {
  ember::utils::CheckpointOptions recompute_all, save_matmuls, no_value_check;
  save_matmuls.policy = ember::utils::save_matmuls();
  no_value_check.check_values = false;
  const Forward segmented = segments_forward(recompute_all), selective = segments_forward(save_matmuls),
                unchecked = segments_forward(no_value_check);

  add(kPlain, [](benchmark::State& state) {
    run_case(state, [] { return train_step(plain_forward); }, nullptr);
  });
  add(kSegmented, [segmented](benchmark::State& state) {
    run_case(state, [segmented] { return train_step(segmented); }, same_gradients_as_plain(segmented));
  });
  add(kSaveMatmuls, [selective](benchmark::State& state) {
    run_case(state, [selective] { return train_step(selective); }, same_gradients_as_plain(selective));
  });
  add(kUnchecked, [unchecked](benchmark::State& state) {
    run_case(state, [unchecked] { return train_step(unchecked); }, same_gradients_as_plain(unchecked));
  });
  // The forward of a training step: grad mode on, so it builds the graph and saves what backward
  // would need (exactly what a recompute does), then drops it all.
  add(kForward, [](benchmark::State& state) {
    run_case(state, [] { return plain_forward(stack->seq, stack->x); }, nullptr);
  });
}

// The console output plus, at the end, the recompute cost in forwards from each case's median,
// in wall-clock time and in CPU time. At one thread the CPU time is the work itself, which the
// other processes of a busy machine inflate less than the wall clock.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  RatioReporter() : ConsoleReporter(OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) {
        real_[r.run_name.function_name].push_back(r.GetAdjustedRealTime());
        cpu_[r.run_name.function_name].push_back(r.GetAdjustedCPUTime());
      }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    print_ratios("wall-clock", real_);
    print_ratios("CPU", cpu_);
  }

 private:
  using Times = std::map<std::string, std::vector<double>>;

  static double median(const Times& times, const std::string& name) {
    auto it = times.find(name);
    if (it == times.end() || it->second.empty()) return -1;
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

  static void print_ratios(const char* clock, const Times& times) {
    const double plain = median(times, kPlain), segmented = median(times, kSegmented),
                 selective = median(times, kSaveMatmuls), unchecked = median(times, kUnchecked),
                 forward = median(times, kForward);
    if (plain <= 0 || forward <= 0) return;  // filtered out or failed
    std::printf("\n%s medians (ms): plain step %.1f, forward %.1f", clock, plain, forward);
    if (segmented > 0) std::printf(", 4 segments %.1f", segmented);
    if (selective > 0) std::printf(", 4 segments + save_matmuls %.1f", selective);
    std::printf("\n");
    if (segmented > 0)
      std::printf("%s ratio segments4: (step - plain step) / forward = %.3f\n", clock, (segmented - plain) / forward);
    if (selective > 0)
      std::printf("%s ratio segments4_save_matmuls: (step - plain step) / forward = %.3f\n", clock,
                  (selective - plain) / forward);
    if (segmented > 0 && unchecked > 0)
      std::printf("%s value check: 4 segments %.1f ms with it, %.1f ms without (check_values = false): %+.1f%%\n",
                  clock, segmented, unchecked, 100.0 * (segmented - unchecked) / unchecked);
  }

  Times real_, cpu_;
};

}  // namespace

int main(int argc, char** argv) {
  if (!ember::bench::setup_threads(argc, argv, "bench_checkpoint")) return 2;
  ember::manual_seed(0);

  Stack model;
  stack = &model;
  register_all();
  RatioReporter reporter;
  return ember::bench::run_benchmarks(argc, argv, &reporter);
}
