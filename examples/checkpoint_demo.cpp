// checkpoint_demo: activation checkpointing, measured. See docs/checkpointing.md for the story;
// this program produces its numbers and its picture.
//
//   checkpoint_demo [--batch 4096] [--width 1024] [--layers 16] [--steps 2] [--budget-mb MiB]
//                   [--svg checkpoint_sweep.svg] [--threads N]
//
// It shows, in order:
//   1. the trade itself: a checkpointed function runs its forward twice;
//   2. what the trade buys on a deep stack of Linear + ReLU layers: memory and time of one
//      training step without checkpointing, with checkpoint_sequential at 1..16 segments, with
//      the save_matmuls policy, and with the budget planner's plan; plus a memory timeline SVG;
//   3. what it must not change: Dropout gradients are bitwise equal (the RNG is replayed) and
//      BatchNorm's running statistics move once per step, not twice.
//
// Memory figures come from the allocator's exact statistics (core/allocator.h): the bytes tensors
// asked for, not what the OS reports, so they are the same on every run and every machine.
// Lines that start with "sweep", "planner" and "result" are key=value, for scripts.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/generator.h"
#include "core/ops.h"
#include "examples/training.h"
#include "nn/nn.h"
#include "utils/checkpoint.h"
#include "utils/checkpoint_sequential.h"
#include "utils/memory_timeline.h"
#include "utils/planner.h"

using namespace ember;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// ------------------------------------------------------------------------------------------------
// Command line

struct Config {
  int64_t batch = 4096, width = 1024, layers = 16;
  int steps = 2;          // timed steps per run, after one untimed step
  double budget_mb = -1;  // planner budget; < 0: halfway between the smallest feasible one and the plain peak
  std::string svg = "checkpoint_sweep.svg";
  int threads = 0;  // 0: ember's default
};

void add_flags(CLI::App& app, Config& cfg) {
  const auto count = CLI::Range(int64_t{1}, int64_t{1} << 20);
  app.add_option("--batch", cfg.batch, "rows of the input")->check(count)->capture_default_str();
  app.add_option("--width", cfg.width, "features of every layer")->check(count)->capture_default_str();
  app.add_option("--layers", cfg.layers, "Linear + ReLU layers")->check(count)->capture_default_str();
  app.add_option("--steps", cfg.steps, "timed steps per run (median), after one untimed step")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--budget-mb", cfg.budget_mb,
                 "planner budget in MiB (default: halfway between the smallest feasible budget and the peak of a "
                 "plain step)")
      ->check(examples::kPositive);
  app.add_option("--svg", cfg.svg, "where to write the memory timeline")->capture_default_str();
  app.add_option("--threads", cfg.threads, "CPU threads (default: every core)")->check(CLI::Range(1, 1024));
}

// ------------------------------------------------------------------------------------------------
// 1. The trade: one more forward

void show_forward_counts() {
  int runs = 0;
  Tensor w = randn({8, 8}).requires_grad_();
  // The function counts its own calls. Checkpointed, it runs once in the forward and once more
  // when backward first needs one of the tensors it saved.
  auto fn = [&runs, &w](const Tensor& x) {
    ++runs;
    return tanh(matmul(x, w));
  };
  Tensor x = randn({4, 8});

  sum(fn(x)).backward();
  std::printf("normal: forward ran %d time(s)\n", runs);

  runs = 0;
  sum(utils::checkpoint(fn, x)).backward();
  std::printf("checkpointed: forward ran %d time(s)\n", runs);
}

// ------------------------------------------------------------------------------------------------
// 2. The sweep: memory and time of one training step

// One flat Sequential of Linear, ReLU, Linear, ReLU, ... (2 * layers modules). Activations
// dominate: each layer keeps a batch x width output, the weights are width x width.
void build_stack(nn::Sequential& seq, int64_t layers, int64_t width) {
  for (int64_t i = 0; i < layers; ++i) {
    seq.add<nn::Linear>(width, width);
    seq.add<nn::ReLU>();
  }
}

// A way of running the forward of a training step.
struct Strategy {
  std::string label;  // for the table
  std::string keys;   // for the machine-readable line, e.g. "segments=4 policy=save_matmuls"
  std::function<Tensor(nn::Sequential&, const Tensor&)> forward;
  // What the forward should leave alive, in activations (one layer's output): L without
  // checkpointing, S - 1 + L / S with S segments (docs/checkpointing.md). -1: no prediction.
  double expected_activations = -1;
};

// checkpoint_sequential at a given number of segments. It cuts the Sequential's modules
// (2 per layer here) into equal runs, so S segments of 2L modules are S segments of L layers.
Strategy segments_strategy(int64_t segments, int64_t layers, const utils::CheckpointOptions& options = {},
                           const std::string& policy = "") {
  Strategy s;
  s.label = std::to_string(segments) + (segments == 1 ? " segment" : " segments") +
            (policy.empty() ? "" : " + " + policy);
  s.keys = "segments=" + std::to_string(segments) + (policy.empty() ? "" : " policy=" + policy);
  s.forward = [segments, options](nn::Sequential& seq, const Tensor& x) {
    return utils::checkpoint_sequential(seq, segments, x, options);
  };
  // The S - 1 checkpointed segments keep only their outputs; the last one runs plainly and keeps
  // all of its L / S layers' outputs. (A policy keeps more; uneven segments are left out.)
  if (policy.empty() && layers % segments == 0)
    s.expected_activations = static_cast<double>(segments - 1 + layers / segments);
  return s;
}

struct StepResult {
  int64_t after_forward = 0;  // bytes the forward leaves alive for backward
  int64_t peak = 0;           // the most bytes alive at any moment of the step
  double ms = 0;
};

// One training step: forward, the sum of the output as the loss, backward. Bytes are counted
// from what was alive before the step (parameters and input), so they are what the step costs.
StepResult training_step(nn::Sequential& seq, const Tensor& x, const Strategy& strategy) {
  seq.zero_grad();  // set_to_none: the step allocates its gradients, as a real training step does
  const int64_t before = memory::stats().live_bytes;
  memory::reset_peak();
  const auto start = std::chrono::steady_clock::now();

  Tensor out = strategy.forward(seq, x);
  const int64_t after_forward = memory::stats().live_bytes - before;
  sum(out).backward();

  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {after_forward, memory::stats().peak_bytes - before, ms};
}

// Bytes from one step of each strategy (they are exact, so one step is enough; it also warms the
// allocator's cache), then the median time of `steps` more. The timed steps go round-robin, one
// step of every strategy per round, so that when the machine's load changes during the sweep it
// changes for every row alike instead of favouring whichever ran while the machine was quiet.
std::vector<StepResult> measure_all(nn::Sequential& seq, const Tensor& x, const std::vector<Strategy>& strategies,
                                    int steps) {
  std::vector<StepResult> results;
  for (const Strategy& s : strategies) results.push_back(training_step(seq, x, s));
  std::vector<std::vector<double>> times(strategies.size());
  for (int round = 1; round <= steps; ++round) {
    for (size_t i = 0; i < strategies.size(); ++i) times[i].push_back(training_step(seq, x, strategies[i]).ms);
    if (strategies.size() > 1) {
      std::printf("  timed round %d of %d\n", round, steps);
      std::fflush(stdout);  // a round takes a while: show progress
    }
  }
  for (size_t i = 0; i < strategies.size(); ++i) results[i].ms = examples::median(times[i]);
  return results;
}

StepResult measure(nn::Sequential& seq, const Tensor& x, const Strategy& strategy, int steps) {
  return measure_all(seq, x, {strategy}, steps).front();
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / kMiB);
  return buf;
}

void print_table_header() {
  std::printf("%-27s %13s %7s %8s %11s %10s %9s %10s\n", "run", "after forward", "(acts)", "S-1+L/S", "peak",
              "peak/plain", "step ms", "time/plain");
}

// `activation`: the bytes of one layer's output, to express "after forward" in activations next
// to what the sqrt(N) formula predicts.
void print_table_row(const Strategy& s, const StepResult& r, const StepResult& plain, int64_t activation) {
  char expected[16] = "-";
  if (s.expected_activations >= 0) std::snprintf(expected, sizeof expected, "%.0f", s.expected_activations);
  std::printf("%-27s %13s %7.1f %8s %11s %9.2fx %9.1f %9.2fx\n", s.label.c_str(), mib(r.after_forward).c_str(),
              static_cast<double>(r.after_forward) / static_cast<double>(activation), expected, mib(r.peak).c_str(),
              static_cast<double>(r.peak) / static_cast<double>(plain.peak), r.ms, r.ms / plain.ms);
}

struct SweepRow {
  Strategy strategy;
  StepResult result;
};

// No checkpointing, then checkpoint_sequential at 1, 2, 4, 8, 16 segments (those the depth
// allows, plus sqrt(layers)), then the save_matmuls policy at sqrt(layers) segments.
std::vector<SweepRow> run_sweep(nn::Sequential& seq, const Tensor& x, const Config& cfg, int64_t sqrt_segments) {
  const int64_t activation = cfg.batch * cfg.width * static_cast<int64_t>(sizeof(float));
  std::vector<Strategy> strategies;
  strategies.push_back({"no checkpointing", "segments=none",
                        [](nn::Sequential& s, const Tensor& in) { return s(in); }, static_cast<double>(cfg.layers)});
  std::vector<int64_t> counts;
  for (int64_t s : {1, 2, 4, 8, 16})
    if (s <= cfg.layers) counts.push_back(s);
  if (std::find(counts.begin(), counts.end(), sqrt_segments) == counts.end()) counts.push_back(sqrt_segments);
  std::sort(counts.begin(), counts.end());
  for (int64_t s : counts) strategies.push_back(segments_strategy(s, cfg.layers));
  utils::CheckpointOptions keep_matmuls;
  keep_matmuls.policy = utils::save_matmuls();
  strategies.push_back(segments_strategy(sqrt_segments, cfg.layers, keep_matmuls, "save_matmuls"));

  std::printf("measuring %zu runs: one step each for the bytes, then %d timed round(s)\n", strategies.size(),
              cfg.steps);
  std::fflush(stdout);
  const std::vector<StepResult> results = measure_all(seq, x, strategies, cfg.steps);
  std::vector<SweepRow> rows;
  for (size_t i = 0; i < strategies.size(); ++i) rows.push_back({strategies[i], results[i]});

  std::printf("\n");
  print_table_header();
  for (const SweepRow& row : rows) print_table_row(row.strategy, row.result, rows.front().result, activation);
  std::printf("(acts: after forward in activations of %s. 1 segment is the plain run: checkpoint_sequential\n"
              " never checkpoints its last segment, whose activations backward needs first.)\n",
              mib(activation).c_str());
  for (const SweepRow& row : rows)
    std::printf("sweep %s peak_bytes=%lld after_forward_bytes=%lld step_ms=%.1f\n", row.strategy.keys.c_str(),
                static_cast<long long>(row.result.peak), static_cast<long long>(row.result.after_forward),
                row.result.ms);
  return rows;
}

// ------------------------------------------------------------------------------------------------
// 2b. The planner: pick the segments from a memory budget

struct PlannerRun {
  utils::CheckpointPlan plan;
  int64_t budget = 0;
  StepResult result;
};

PlannerRun run_planner(nn::Sequential& seq, const Tensor& x, const Config& cfg, const StepResult& plain) {
  // One plain step, measured module by module; the plan is computed from that.
  const std::vector<utils::LayerProfile> profile = utils::profile_layers(seq, x);
  const int64_t smallest = utils::min_feasible_budget(profile);
  std::printf("planner: smallest feasible budget (utils::min_feasible_budget) %s (%lld bytes)\n",
              mib(smallest).c_str(), static_cast<long long>(smallest));

  PlannerRun run;
  // Default budget: halfway between the least any plan needs and the peak of a plain step.
  run.budget = cfg.budget_mb > 0 ? examples::mib_to_bytes(cfg.budget_mb, "checkpoint_demo --budget-mb")
                                 : smallest + (std::max(plain.peak, smallest) - smallest) / 2;
  run.plan = utils::plan_checkpoints(profile, run.budget);  // throws, naming the smallest budget, if none fits
  int64_t forward_flops = 0;
  for (const utils::LayerProfile& layer : profile) forward_flops += layer.forward_flops;
  std::printf("planner: budget %s -> plan %s, recomputing %.2f of a forward\n", mib(run.budget).c_str(),
              run.plan.str().c_str(),
              static_cast<double>(run.plan.recompute_flops) / static_cast<double>(std::max<int64_t>(forward_flops, 1)));
  std::printf("         (ranges of the Sequential's modules: Linear at even, ReLU at odd indices)\n");

  const utils::CheckpointPlan plan = run.plan;
  Strategy planned{"planner", "",
                   [plan](nn::Sequential& s, const Tensor& in) { return utils::run_plan(s, plan, in); }};
  run.result = measure(seq, x, planned, cfg.steps);
  // The prediction bounds the step's peak (Note [Checkpoint planning]); the margin is what it
  // overcounts.
  std::printf("planner: predicted peak %s, measured %s: %s the budget, %s under the prediction\n",
              mib(run.plan.predicted_peak_bytes).c_str(), mib(run.result.peak).c_str(),
              run.result.peak <= run.budget ? "within" : "OVER",
              mib(run.plan.predicted_peak_bytes - run.result.peak).c_str());
  std::printf("planner budget_bytes=%lld predicted_peak_bytes=%lld peak_bytes=%lld recompute_flops=%lld step_ms=%.1f\n",
              static_cast<long long>(run.budget), static_cast<long long>(run.plan.predicted_peak_bytes),
              static_cast<long long>(run.result.peak), static_cast<long long>(run.plan.recompute_flops), run.result.ms);
  return run;
}

// ------------------------------------------------------------------------------------------------
// 2c. The memory timeline of one step of each of three runs

std::vector<utils::MemoryEvent> record_step(nn::Sequential& seq, const Tensor& x, const Strategy& strategy) {
  seq.zero_grad();  // before recording, so the panel starts with the step itself
  utils::MemoryTimeline timeline;
  training_step(seq, x, strategy);
  timeline.stop();
  return timeline.events();
}

void write_timelines(nn::Sequential& seq, const Tensor& x, const Config& cfg, int64_t sqrt_segments,
                     const utils::CheckpointPlan& plan) {
  const Strategy plain{"", "", [](nn::Sequential& s, const Tensor& in) { return s(in); }};
  const Strategy planned{"", "",
                         [plan](nn::Sequential& s, const Tensor& in) { return utils::run_plan(s, plan, in); }};
  std::vector<utils::TimelineSeries> series;
  series.push_back({"no checkpointing", record_step(seq, x, plain)});
  series.push_back({std::to_string(sqrt_segments) + " segments (checkpoint_sequential)",
                    record_step(seq, x, segments_strategy(sqrt_segments, cfg.layers))});
  series.push_back({"planner: " + plan.str(), record_step(seq, x, planned)});
  const std::string title = "one training step of " + std::to_string(cfg.layers) + " x (Linear(" +
                            std::to_string(cfg.width) + ", " + std::to_string(cfg.width) + ") + ReLU), batch " +
                            std::to_string(cfg.batch);
  utils::write_timeline_svg(cfg.svg, series, title);
  std::printf("timeline: wrote %s (%zu, %zu and %zu allocator events)\n", cfg.svg.c_str(), series[0].events.size(),
              series[1].events.size(), series[2].events.size());
}

// ------------------------------------------------------------------------------------------------
// 3. What checkpointing must not change

// An MLP whose middle part, the part we checkpoint, draws two Dropout masks.
struct DropoutMlp : nn::Module {
  nn::Linear fc1{64, 128}, fc2{128, 128}, fc3{128, 10};
  nn::Dropout drop{0.5};
  DropoutMlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
    register_module("drop", drop);
  }
  Tensor body(const Tensor& x) { return drop(relu(fc2(drop(relu(fc1(x)))))); }
  Tensor forward(const Tensor& x) override { return fc3(body(x)); }
};

// The parameter gradients of one step, with the generator seeded the same way each time.
std::vector<Tensor> dropout_step_grads(DropoutMlp& net, const Tensor& x, const Tensor& y, bool checkpointed,
                                       const utils::CheckpointOptions& options = {}) {
  net.zero_grad();
  manual_seed(1234);
  auto body = [&net](const Tensor& in) { return net.body(in); };
  Tensor h = checkpointed ? utils::checkpoint(body, x, options) : body(x);
  cross_entropy(net.fc3(h), y).backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : net.parameters()) grads.push_back(p.grad());
  return grads;
}

double max_abs_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, max(abs(a[i] - b[i])).item());
  return worst;
}

double show_dropout_parity() {
  manual_seed(0);
  DropoutMlp net;
  Tensor x = randn({32, 64}), y = randint(0, 10, {32});
  const std::vector<Tensor> plain = dropout_step_grads(net, x, y, false);
  const double diff = max_abs_difference(plain, dropout_step_grads(net, x, y, true));
  std::printf("dropout parity: max |grad difference| = %g\n", diff);
  // The counterfactual: without replaying the generator, the recompute draws new masks, so the
  // backward uses masks the forward never applied. (The value check would stop that backward with
  // an error, so it is switched off to show the wrong gradient it prevents.)
  utils::CheckpointOptions no_replay;
  no_replay.preserve_rng_state = false;
  no_replay.check_values = false;
  const double wrong = max_abs_difference(plain, dropout_step_grads(net, x, y, true, no_replay));
  std::printf("  (with preserve_rng_state = false it would be %g)\n", wrong);
  return diff;
}

struct BatchNormNet : nn::Module {
  nn::Linear fc1{32, 64}, fc2{64, 10};
  nn::BatchNorm1d bn{64};
  BatchNormNet() {
    register_module("fc1", fc1);
    register_module("bn", bn);
    register_module("fc2", fc2);
  }
  Tensor body(const Tensor& x) { return relu(bn(fc1(x))); }
  Tensor forward(const Tensor& x) override { return fc2(body(x)); }
};

void batchnorm_step(BatchNormNet& net, const Tensor& x, const Tensor& y, bool checkpointed) {
  net.zero_grad();
  auto body = [&net](const Tensor& in) { return net.body(in); };
  Tensor h = checkpointed ? utils::checkpoint(body, x) : body(x);
  cross_entropy(net.fc2(h), y).backward();
}

bool same_values(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item() == 0.0; }

int64_t show_batchnorm_statistics() {
  manual_seed(0);
  BatchNormNet net;
  Tensor x = randn({32, 32}), y = randint(0, 10, {32});

  batchnorm_step(net, x, y, false);
  const Tensor plain_mean = net.bn.running_mean.clone(), plain_var = net.bn.running_var.clone();

  // The same step checkpointed, from fresh statistics. The forward updates them; the recompute
  // in backward runs BatchNorm again but sees utils::is_recomputing() and leaves them alone.
  net.bn.reset_running_stats();
  batchnorm_step(net, x, y, true);
  const auto tracked = static_cast<int64_t>(net.bn.num_batches_tracked.item());
  const bool equal = same_values(net.bn.running_mean, plain_mean) && same_values(net.bn.running_var, plain_var);
  const std::string times = tracked == 1 ? "once" : tracked == 2 ? "twice" : std::to_string(tracked) + " times";
  std::printf("batchnorm: statistics updated %s (num_batches_tracked=%lld, running stats equal to a plain step: %s)\n",
              times.c_str(), static_cast<long long>(tracked), equal ? "yes" : "no");
  return tracked;
}

int64_t nearest_sqrt(int64_t n) { return std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(n)))); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Activation checkpointing, measured: memory and time of a deep Linear + ReLU stack"};
  Config cfg;
  add_flags(app, cfg);
  return examples::run_main(app, argc, argv, "checkpoint_demo", [&] {
    if (cfg.threads > 0) set_num_threads(cfg.threads);
    std::printf("== 1. The trade: compute for memory\n");
    show_forward_counts();

    std::printf("\n== 2. %lld x (Linear(%lld, %lld) + ReLU), input %lld x %lld, %d thread(s), median of %d step(s)\n",
                static_cast<long long>(cfg.layers), static_cast<long long>(cfg.width),
                static_cast<long long>(cfg.width), static_cast<long long>(cfg.batch),
                static_cast<long long>(cfg.width), get_num_threads(), cfg.steps);
    manual_seed(0);
    nn::Sequential seq;
    build_stack(seq, cfg.layers, cfg.width);
    Tensor x = randn({cfg.batch, cfg.width});
    const int64_t activation = cfg.batch * cfg.width * static_cast<int64_t>(sizeof(float));
    std::printf("one activation (one layer's output) is %s; bytes below are what the step adds to the %s already\n"
                "alive (parameters and input); peak includes the parameter gradients made in backward\n\n",
                mib(activation).c_str(), mib(memory::stats().live_bytes).c_str());

    const int64_t sqrt_segments = nearest_sqrt(cfg.layers);
    const std::vector<SweepRow> rows = run_sweep(seq, x, cfg, sqrt_segments);
    const StepResult& plain = rows.front().result;
    auto row_for = [&rows](const std::string& keys) {
      return std::find_if(rows.begin(), rows.end(), [&](const SweepRow& r) { return r.strategy.keys == keys; })->result;
    };
    const StepResult sqrt_run = row_for("segments=" + std::to_string(sqrt_segments));
    const StepResult matmul_run = row_for("segments=" + std::to_string(sqrt_segments) + " policy=save_matmuls");

    std::printf("\n");
    const PlannerRun planned = run_planner(seq, x, cfg, plain);
    write_timelines(seq, x, cfg, sqrt_segments, planned.plan);

    std::printf("\n== 3. What checkpointing does not change\n");
    const double dropout_diff = show_dropout_parity();
    const int64_t bn_tracked = show_batchnorm_statistics();

    std::printf(
        "\nresult demo=checkpoint layers=%lld batch=%lld width=%lld plain_peak_bytes=%lld sqrt_segments=%lld "
        "sqrt_peak_bytes=%lld ratio=%.3f plain_step_ms=%.1f sqrt_step_ms=%.1f time_ratio=%.3f "
        "save_matmuls_step_ms=%.1f planner_budget_bytes=%lld planner_predicted_peak_bytes=%lld "
        "planner_peak_bytes=%lld dropout_max_grad_diff=%g batchnorm_batches_tracked=%lld\n",
        static_cast<long long>(cfg.layers), static_cast<long long>(cfg.batch), static_cast<long long>(cfg.width),
        static_cast<long long>(plain.peak), static_cast<long long>(sqrt_segments),
        static_cast<long long>(sqrt_run.peak), static_cast<double>(sqrt_run.peak) / static_cast<double>(plain.peak),
        plain.ms, sqrt_run.ms, sqrt_run.ms / plain.ms, matmul_run.ms, static_cast<long long>(planned.budget),
        static_cast<long long>(planned.plan.predicted_peak_bytes), static_cast<long long>(planned.result.peak),
        dropout_diff, static_cast<long long>(bn_tracked));
  });
}
