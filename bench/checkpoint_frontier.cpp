// checkpoint_frontier: the memory/time trade of activation checkpointing as a curve (issue 25,
// docs/checkpointing.md section 11). For each model it measures one training step's peak bytes
// (ember's allocator, above what was live before the step) and time, under:
//   none                    no checkpointing
//   blocks                  every block but the last checkpointed
//   sqrt                    checkpoint_sequential in round(sqrt(n)) segments
//   blocks+<policy>         every block but the last, with a ready-made policy (save_matmuls,
//                           save_attention, save_every(2, matmul), save_modules(attn))
//   every_other_block       blocks 0, 2, 4, ... checkpointed
//   planner                 --checkpoint budget=MB's plan (utils::plan_selective), at --budgets
//                           budgets from the smallest feasible one to the plain step's peak
//   planner@torch:<config>  the same with PyTorch's measured peak for <config> as the budget
//                           (--torch FILE, from bench/torch_checkpoint_frontier.py)
//   planner@<f>x            the same with a fraction f of the plain step's peak as the budget
//                           (--fractions, e.g. 0.5: issue 25's half of the plain peak)
// Models: gpt8 and gpt16 (examples/gpt.h at 8 and 16 blocks, d = 128, 4 heads, context 256,
// batch 16, train_gpt --sweep's GPT, cross-entropy loss) and linear16 (checkpoint_demo's 16 x
// (Linear(1024) + ReLU) on 4096 x 1024, the output's sum as the loss; a block is one Linear +
// ReLU). Every configuration runs on one model (the plans are run_plan's, which leave the
// model as it is), the configurations of a model taking turns within each of --rounds rounds,
// after an untimed one; times are medians, with each round's ratio to its plain step.
//
//   checkpoint_frontier [--models gpt8,gpt16,linear16] [--rounds 5] [--budgets 8] [--no-value-check]
//                       [--torch bench/results/torch_checkpoint_frontier.json] [--json out.json]
//                       [--configs none,every_other_block,planner@torch:every_other_block]
//                       [--fractions 0.5] [--both-value-checks]
// --no-value-check runs every checkpoint with check_values = false: the recompute is checked for
// its shapes and dtypes only, as PyTorch's non-reentrant checkpoint does by default, not for its
// values (Note [Checking the recompute] in utils/checkpoint_value_check.cpp). --both-value-checks
// runs every planner point both ways, taking turns, so that the check's cost is measured within
// one run: the copy is named <config>/shapes_only, or <config>/values_checked with
// --no-value-check.
//
// bench/draw_checkpoint_frontier.py draws the JSON next to PyTorch's (docs/checkpoint_frontier.svg).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cpu_settings.h"
#include "core/generator.h"
#include "examples/char_text.h"
#include "examples/checkpoint_mode.h"
#include "examples/gpt.h"
#include "examples/training.h"
#include "nn/nn.h"
#include "utils/checkpoint_sequential.h"
#include "utils/op_planner.h"
#include "utils/planner.h"

using namespace ember;

namespace {

struct Settings {
  std::string models = "gpt8,gpt16,linear16";
  int rounds = 5;
  int budgets = 8;
  std::string torch_json;
  std::string json_out;
  int threads = 2;
  bool check_values = true;  // the checkpoint's value check (PyTorch checks shapes and dtypes only)
  bool both_checks = false;  // every planner point also with the other value check, taking turns
  std::vector<std::string> configs;  // --configs: only these (and none, every ratio's base)
  std::vector<double> fractions;     // --fractions: planner points at these fractions of the plain peak
};

// One configuration of one model: its forward (the model's, checkpointed as it says) and what it
// measured.
struct Config {
  Config(std::string name, examples::Forward forward, int64_t budget = 0)
      : name(std::move(name)), forward(std::move(forward)), budget(budget) {}
  std::string name;
  examples::Forward forward;
  int64_t budget;  // for the planner's points
  int64_t peak = 0;
  std::vector<double> ms, ratio;
};

// A model under test: its layers as the planner sees them, and one training step.
struct Bench {
  Bench() = default;
  Bench(const Bench&) = delete;  // its functions hold references to it
  Bench& operator=(const Bench&) = delete;
  std::string name, description;
  std::unique_ptr<nn::Module> model;
  nn::ModuleList* blocks = nullptr;
  examples::StackedModel parts() { return {*model, *blocks, stem, head}; }
  std::function<Tensor(const Tensor&)> stem, head;
  Tensor x;
  std::function<Tensor(const Tensor& output)> loss;
  // Whether the step holds the model's output through backward: linear16's does, as
  // checkpoint_demo's step and PyTorch's side do; the GPT's logits go before backward, as fit and
  // train_gpt's sweep let them go and as PyTorch's side does.
  bool output_held = false;
  // The plan of budget=MB for a step's budget (Note [Budgeting a training step]); linear16's step
  // is its blocks alone, planned with the sum's loss.
  std::function<examples::Forward(int64_t budget)> planned;
  utils::CheckpointOptions options;  // of every checkpointed region
  int64_t smallest_budget = 0;
};

// Segments [i, i+1) for the blocks `checkpointed` says, plain ones merged.
utils::CheckpointPlan per_block(size_t n, const std::function<bool(size_t)>& checkpointed) {
  utils::CheckpointPlan plan;
  for (size_t i = 0; i < n; ++i) {
    const bool ckpt = checkpointed(i);
    if (!ckpt && !plan.segments.empty() && !plan.segments.back().checkpointed) plan.segments.back().end = i + 1;
    else plan.segments.push_back({i, i + 1, ckpt});
  }
  return plan;
}

// Fills b in place: its functions hold references to it.
void make_gpt(Bench& b, int64_t layers, int64_t vocab) {
  b.name = "gpt" + std::to_string(layers);
  examples::GPTConfig c;
  c.vocab_size = vocab;
  c.context = 256;
  c.num_layers = layers;
  manual_seed(0);
  auto model = std::make_unique<examples::GPT>(c);
  examples::GPT& m = *model;
  b.description = std::to_string(layers) + " blocks, d=128, 4 heads, context 256, batch 16, vocab " +
                  std::to_string(vocab) + ", cross-entropy";
  b.blocks = &m.blocks;
  b.stem = [&m](const Tensor& ids) { return m.stem_forward(ids); };
  b.head = [&m](const Tensor& h) { return m.head_forward(h); };
  b.x = randint(0, vocab, {16, 256});
  const Tensor y = randint(0, vocab, {16, 256});
  b.loss = [y](const Tensor& logits) { return cross_entropy(logits.flatten(0, 1), y.flatten()); };
  b.model = std::move(model);
  const examples::StepBudget step = examples::profile_step_budget(b.parts(), b.x);
  b.smallest_budget = step.smallest();
  b.planned = [&b](int64_t budget) {
    return examples::checkpointed_forward(b.parts(), {"budget", budget}, b.x, b.options);
  };
}

void make_linear(Bench& b) {
  b.name = "linear16";
  b.description = "16 x (Linear(1024, 1024) + ReLU), input 4096 x 1024, the output's sum";
  manual_seed(0);
  auto seq = std::make_unique<nn::ModuleList>();
  for (int i = 0; i < 16; ++i) {
    auto& block = seq->add<nn::Sequential>();
    block.add<nn::Linear>(1024, 1024);
    block.add<nn::ReLU>();
  }
  b.blocks = seq.get();
  b.stem = b.head = [](const Tensor& h) { return h; };
  b.x = randn({4096, 1024});
  b.loss = [](const Tensor& out) { return out.sum(); };
  b.output_held = true;
  b.model = std::move(seq);
  b.smallest_budget = utils::min_feasible_budget(utils::profile_layers(*b.blocks, b.x));
  b.planned = [&b](int64_t budget) {
    const utils::SelectivePlan plan = utils::plan_selective(*b.blocks, b.x, budget);
    std::printf("  plan for %lld bytes: %s\n", static_cast<long long>(budget), plan.str().c_str());
    return examples::Forward(
        [&b, plan, options = b.options](const Tensor& x) { return utils::run_plan(*b.blocks, plan, x, options); });
  };
}

// The configurations that do not depend on a budget.
std::vector<Config> fixed_configs(Bench& b) {
  nn::ModuleList& blocks = *b.blocks;
  const size_t n = blocks.size();
  auto through = [&b](utils::CheckpointPlan plan, utils::CheckpointPolicy policy) {
    utils::CheckpointOptions options = b.options;
    options.policy = std::move(policy);
    return examples::Forward([&b, plan, options](const Tensor& x) {
      return b.head(utils::run_plan(*b.blocks, plan, b.stem(x), options));
    });
  };
  const utils::CheckpointPlan all_but_last = per_block(n, [n](size_t i) { return i + 1 < n; });
  std::vector<Config> configs;
  configs.push_back({"none", through(per_block(n, [](size_t) { return false; }), utils::recompute_all())});
  configs.push_back({"blocks", through(all_but_last, utils::recompute_all())});
  const auto segments = std::max<int64_t>(1, std::lround(std::sqrt(static_cast<double>(n))));
  configs.push_back({"sqrt", [&b, segments](const Tensor& x) {
                       return b.head(utils::checkpoint_sequential(*b.blocks, segments, b.stem(x), b.options));
                     }});
  configs.push_back({"blocks+save_matmuls", through(all_but_last, utils::save_matmuls())});
  if (b.name != "linear16") configs.push_back({"blocks+save_attention", through(all_but_last, utils::save_attention())});
  configs.push_back({"blocks+save_every_2nd_matmul", through(all_but_last, utils::save_every(2, "matmul"))});
  if (b.name != "linear16") configs.push_back({"blocks+save_modules(attn)", through(all_but_last, utils::save_modules("attn"))});
  configs.push_back(
      {"every_other_block", through(per_block(n, [](size_t i) { return i % 2 == 0; }), utils::recompute_all())});
  return configs;
}
}  // namespace

namespace {

// PyTorch's measured peaks per model and configuration, from torch_checkpoint_frontier.py's JSON.
std::vector<std::pair<std::string, int64_t>> torch_peaks(const nlohmann::json& torch, const std::string& model) {
  std::vector<std::pair<std::string, int64_t>> peaks;
  if (torch.is_null() || !torch["models"].contains(model)) return peaks;
  for (const auto& point : torch["models"][model]["points"])
    peaks.emplace_back(point["config"].get<std::string>(), point["peak_bytes"].get<int64_t>());
  return peaks;
}

// Every configuration takes one untimed step, then one step per round, taking turns.
void measure(Bench& b, std::vector<Config>& configs, int rounds) {
  using Clock = std::chrono::steady_clock;
  for (int round = 0; round <= rounds; ++round) {
    for (Config& c : configs) {
      b.model->zero_grad();
      const int64_t before = memory::stats().live_bytes;
      memory::reset_peak();
      const auto start = Clock::now();
      Tensor output = c.forward(b.x);
      Tensor loss = b.loss(output);
      if (!b.output_held) output = Tensor();
      loss.backward();
      const double ms = 1000 * std::chrono::duration<double>(Clock::now() - start).count();
      c.peak = std::max(c.peak, memory::stats().peak_bytes - before);
      if (round == 0) continue;
      c.ms.push_back(ms);
      c.ratio.push_back(ms / configs.front().ms.back());
    }
  }
}

// Whether --configs asks for a configuration (none always runs: it is every ratio's base).
bool wanted(const Settings& s, const std::string& config) {
  return s.configs.empty() || config == "none" || std::ranges::find(s.configs, config) != s.configs.end();
}

nlohmann::json run_model(Bench& b, const Settings& s, const nlohmann::json& torch) {
  std::vector<Config> configs = fixed_configs(b);
  std::erase_if(configs, [&s](const Config& c) { return !wanted(s, c.name); });
  // The plain step's peak, for the planner's range of budgets.
  measure(b, configs, 0);
  const int64_t plain = configs.front().peak, smallest = b.smallest_budget;
  configs.front().peak = 0;
  // A planner point, and with --both-value-checks the same plan with the other check.
  const auto add_planned = [&](const std::string& name, int64_t budget) {
    configs.push_back({name, b.planned(budget), budget});
    if (!s.both_checks) return;
    b.options.check_values = !s.check_values;
    configs.push_back({name + (s.check_values ? "/shapes_only" : "/values_checked"), b.planned(budget), budget});
    b.options.check_values = s.check_values;
  };
  for (int i = 0; i < s.budgets && wanted(s, "planner"); ++i)
    add_planned("planner", smallest + (plain - smallest) * i / std::max(1, s.budgets - 1));
  for (const double f : s.fractions) {
    std::ostringstream name;
    name << "planner@" << f << "x";
    const auto budget = static_cast<int64_t>(f * static_cast<double>(plain));
    if (!wanted(s, name.str())) continue;
    if (budget < smallest) {
      std::printf("frontier model=%s config=%s budget_bytes=%lld infeasible smallest_budget=%lld\n", b.name.c_str(),
                  name.str().c_str(), static_cast<long long>(budget), static_cast<long long>(smallest));
      continue;
    }
    add_planned(name.str(), budget);
  }
  for (const auto& [config, peak] : torch_peaks(torch, b.name)) {
    if (!wanted(s, "planner@torch:" + config)) continue;
    if (peak < smallest) {
      std::printf("frontier model=%s config=planner@torch:%s budget_bytes=%lld infeasible smallest_budget=%lld\n",
                  b.name.c_str(), config.c_str(), static_cast<long long>(peak), static_cast<long long>(smallest));
      continue;
    }
    add_planned("planner@torch:" + config, peak);
  }
  measure(b, configs, s.rounds);
  nlohmann::json points = nlohmann::json::array();
  for (const Config& c : configs) {
    nlohmann::json p = {{"config", c.name},
                        {"peak_bytes", c.peak},
                        {"step_ms", examples::median(c.ms)},
                        {"time_ratio", examples::median(c.ratio)}};
    if (c.budget > 0) p["budget_bytes"] = c.budget;
    std::printf("frontier model=%s config=%s peak_bytes=%lld step_ms=%.1f time_ratio=%.3f", b.name.c_str(),
                c.name.c_str(), static_cast<long long>(c.peak), examples::median(c.ms), examples::median(c.ratio));
    if (c.budget > 0)
      std::printf(" budget_bytes=%lld within_budget=%s", static_cast<long long>(c.budget),
                  c.peak <= c.budget ? "yes" : "NO");
    std::printf("\n");
    std::fflush(stdout);
    points.push_back(p);
  }
  return {{"description", b.description}, {"smallest_budget_bytes", smallest}, {"points", points}};
}

std::vector<double> load_average() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) != 3) return {};
  auto hundredths = [](double x) { return std::round(x * 100) / 100; };
  return {hundredths(load[0]), hundredths(load[1]), hundredths(load[2])};
}

}  // namespace

int main(int argc, char** argv) {
  examples::ensure_passive_openmp_wait(argv);
  CLI::App app{"Peak memory and step time of activation checkpointing configurations, for the frontier curve"};
  Settings s;
  app.add_option("--models", s.models, "comma-separated: gpt8, gpt16, linear16")->capture_default_str();
  app.add_option("--rounds", s.rounds, "timed rounds (one step of every configuration per round)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--budgets", s.budgets, "planner budgets from the smallest feasible one to the plain peak")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  app.add_option("--torch", s.torch_json, "bench/torch_checkpoint_frontier.py's JSON: plan for its peaks too")
      ->check(CLI::ExistingFile);
  app.add_option("--json", s.json_out, "write the points here");
  app.add_option("--configs", s.configs,
                 "only these configurations (none, every ratio's base, always runs; planner: the budget points; "
                 "planner@torch:CONFIG): a few points over more rounds")
      ->delimiter(',');
  app.add_option("--fractions", s.fractions, "also plan for these fractions of the plain step's peak (planner@Fx)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--threads", s.threads, "CPU threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_flag("!--no-value-check", s.check_values,
               "check the recompute's shapes and dtypes only, as PyTorch does (CheckpointOptions::check_values)");
  app.add_flag("--both-value-checks", s.both_checks,
               "run every planner point also with the other check (<config>/shapes_only, or "
               "<config>/values_checked with --no-value-check), taking turns: the value check's cost in one run");
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(s.threads);
    nlohmann::json torch;
    if (!s.torch_json.empty()) torch = nlohmann::json::parse(std::ifstream(s.torch_json));
    nlohmann::json out = {{"framework", "ember"},         {"threads", s.threads},
                          {"rounds", s.rounds},             {"check_values", s.check_values},
                          {"loadavg_before", load_average()}};
    std::stringstream names(s.models);
    for (std::string name; std::getline(names, name, ',');) {
      Bench b;
      b.options.check_values = s.check_values;
      if (name == "gpt8" || name == "gpt16") {
        make_gpt(b, name == "gpt8" ? 8 : 16, examples::CharVocab(examples::read_fortunes()).size());
      } else {
        EMBER_CHECK(name == "linear16", "[checkpoint_frontier] unknown model '", name, "' (gpt8, gpt16, linear16)");
        make_linear(b);
      }
      std::printf("model %s: %s\n", name.c_str(), b.description.c_str());
      out["models"][name] = run_model(b, s, torch);
    }
    out["loadavg_after"] = load_average();
    if (!s.json_out.empty()) std::ofstream(s.json_out) << out.dump(1) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_frontier: %s\n", e.what());
    return 1;
  }
  return 0;
}
