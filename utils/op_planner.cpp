// Note [Planning per-op saves]
// Within a checkpointed region, keeping an op's output (a policy's save) costs its bytes from the
// region's forward until its recompute (Note [Letting kept outputs go]) and saves the recompute
// that op's work. Both are additive over ops, so choosing what to keep is a 0/1 knapsack: the ops
// the base policy leaves open (it only prefers) that can be replayed and compute something
// (utils::estimated_flops: a view computes nothing, and keeping it would save nothing) are the
// items, the base's MustSave ops are taken first, and the budget bounds the bytes kept.
//
// Search. Items are taken in order, and a partial choice is summarised by (bytes kept, work
// saved); keeping at every step the Pareto frontier of those pairs (no other pair with fewer
// bytes and more work saved) is exact, as in Note [Checkpoint planning]: the plan saves the most
// work of all choices that fit. The frontier holds at most one pair per distinct byte total; a
// network's ops come in few sizes, so it stays small.
//
// Early stop: the recompute ends as the last saved tensor comes back, so the ops after the last
// op that saved a tensor are never recomputed, nor is that op itself unless it saved its output
// (an op saving only its inputs, a matmul, saves them before computing). Their work counts for
// nothing, and keeping them is never planned.
//
// What the plan adds to a step's memory: each checkpointed region holds at most its kept_bytes
// more than without a policy, until its recompute, and its recompute allocates no more than
// without (a replayed op allocates nothing); so the segment planner's predicted peak plus
// kept_bytes for each checkpointed segment bounds the peak of a step that runs both plans.
//
// plan_selective builds on that. A segment plan that fits the budget tightly leaves no room for
// kept ops, and one that recomputes more may leave room for enough of them to come out ahead,
// so it walks the segment planner's plans from the budget's down (each next one for a budget
// just under the last one's prediction, until none is feasible), spends what each leaves of the
// budget on one knapsack over the ops of all its checkpointed segments (each profiled once, on
// its input), and returns the one that recomputes least, counted op by op. (The segment planner
// counts by whole modules, up to the last that saved a tensor, so it also counts that module's
// work after its last save, which the recompute skips: a matmul that saves its inputs and is a
// segment's last saving op is never recomputed. Counting the same way for every candidate
// matters more than either count: with the segment planner's, a plan of many short segments,
// each charged for work its recompute skips, would lose to fewer long ones that recompute more.)
#include "utils/op_planner.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/allocator.h"
#include "utils/layer_profile.h"
#include "utils/planner.h"
#include "utils/untraced_step.h"

namespace ember::utils {

namespace {

// What the policy of a region that `run` checkpoints (with the options it is given) sees.
template <class Run>
std::vector<OpInfo> seen_by_a_policy(const Run& run) {
  const UntracedStep no_trace(std::vector<Tensor>{});  // no backward runs, so no .grad to set aside
  std::vector<OpInfo> ops;
  CheckpointOptions options;
  options.check_values = false;  // nothing is recomputed
  options.policy = [&ops](const OpInfo& op) {
    ops.push_back(op);
    return CheckpointDecision::PreferRecompute;
  };
  run(options);
  return ops;
}

// A partial choice: the bytes it keeps, the work it saves, and how it was made.
struct Choice {
  int64_t bytes, flops;
  int item;    // the item it took last, or -1
  int parent;  // the choice it extended, or -1
};

struct Item {
  int64_t bytes, flops;
};

// The items to take, in order, for the most flops within `budget` bytes (the Note's search).
std::vector<size_t> knapsack(const std::vector<Item>& items, int64_t budget) {
  std::vector<Choice> choices{{0, 0, -1, -1}};
  std::vector<int> frontier{0};  // by bytes, with strictly more work saved at every step
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<int> next = frontier;
    for (int c : frontier) {
      const Choice from = choices[static_cast<size_t>(c)];
      if (from.bytes + items[i].bytes > budget) continue;
      choices.push_back({from.bytes + items[i].bytes, from.flops + items[i].flops, static_cast<int>(i), c});
      next.push_back(static_cast<int>(choices.size() - 1));
    }
    std::sort(next.begin(), next.end(), [&](int a, int b) {
      const Choice &x = choices[static_cast<size_t>(a)], &y = choices[static_cast<size_t>(b)];
      return x.bytes != y.bytes ? x.bytes < y.bytes : x.flops > y.flops;
    });
    frontier.clear();
    for (int c : next)
      if (frontier.empty() || choices[static_cast<size_t>(c)].flops > choices[static_cast<size_t>(frontier.back())].flops)
        frontier.push_back(c);
  }
  std::vector<size_t> taken;
  for (int c = frontier.back(); choices[static_cast<size_t>(c)].item >= 0; c = choices[static_cast<size_t>(c)].parent)
    taken.push_back(static_cast<size_t>(choices[static_cast<size_t>(c)].item));
  std::reverse(taken.begin(), taken.end());
  return taken;
}

// Adds `op` to the ops `plan` keeps.
void keep(OpPlan& plan, const OpInfo& op) {
  plan.kept.push_back({op.index, op.name});
  plan.kept_bytes += op.output.nbytes();
  plan.saved_flops += op.flops;
  plan.recompute_flops -= op.flops;
}

// Whether the recompute runs each op to its end (early stop, Note [Non-reentrant checkpointing]):
// it stops as the last saved tensor comes back, so it runs every op before the last one that
// saved a tensor, and that one too if it saved its output (which it had to compute first).
std::vector<bool> recomputed(const std::vector<OpInfo>& ops) {
  std::vector<bool> runs(ops.size(), false);
  bool later_saves = false;
  for (size_t i = ops.size(); i-- > 0;) {
    runs[i] = later_saves || ops[i].saved_output;
    later_saves |= ops[i].saved > 0;
  }
  return runs;
}

// OpInfo may be made by hand: every op's output bytes (output.nbytes() checks the shape) and work
// must be counts, and all of them together far from int64's end, so that the knapsack's sums
// cannot overflow.
void check_ops(const std::vector<std::vector<OpInfo>>& regions) {
  double bytes = 0, flops = 0;
  for (const std::vector<OpInfo>& ops : regions)
    for (const OpInfo& op : ops) {
      EMBER_CHECK(op.flops >= 0, "[plan_op_saves] op ", op.index, " (", op.name, ") has negative work (", op.flops,
                  ")");
      bytes += static_cast<double>(op.output.nbytes());
      flops += static_cast<double>(op.flops);
    }
  EMBER_CHECK(bytes < 0x1p60 && flops < 0x1p60, "[plan_op_saves] the ops' outputs add up to more than 2^60 bytes or "
              "operations: not the profile of a region that runs");
}

// The base's MustSave ops in `plan` (checked), and the ops open to the plan.
std::vector<size_t> open_ops(const std::vector<OpInfo>& ops, const CheckpointPolicy& base, OpPlan& plan) {
  std::vector<size_t> open;
  const std::vector<bool> runs = recomputed(ops);
  for (size_t i = 0; i < ops.size(); ++i) {
    OpInfo op = ops[i];
    if (!runs[i]) op.flops = 0;  // keeping it would save nothing
    plan.recompute_flops += op.flops;
    const CheckpointDecision d = base(op);
    if (d == CheckpointDecision::MustSave) {
      EMBER_CHECK(op.replayable, "[plan_op_saves] the base policy says MustSave for op ", op.index, " (", op.name,
                  "), which cannot be replayed: the checkpoint would refuse it");
      keep(plan, op);
    } else if (!is_must(d) && op.replayable && op.flops > 0) {
      open.push_back(i);
    }
  }
  return open;
}

}  // namespace

std::vector<OpInfo> profile_ops(const MultiFunction& fn, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(fn, "[profile_ops] the function is empty");
  return seen_by_a_policy([&](const CheckpointOptions& options) { checkpoint(fn, inputs, options); });
}

std::vector<OpInfo> profile_ops(nn::Module& module, const Tensor& input) {
  return seen_by_a_policy([&](const CheckpointOptions& options) { checkpoint(module, input, options); });
}

OpPlan plan_op_saves(const std::vector<OpInfo>& ops, int64_t budget_bytes, const CheckpointPolicy& base) {
  return plan_op_saves(std::vector<std::vector<OpInfo>>{ops}, budget_bytes, base).front();
}

std::vector<OpPlan> plan_op_saves(const std::vector<std::vector<OpInfo>>& regions, int64_t budget_bytes,
                                  const CheckpointPolicy& base) {
  EMBER_CHECK(budget_bytes >= 0, "[plan_op_saves] the budget must be at least 0 bytes, got ", budget_bytes);
  EMBER_CHECK(base, "[plan_op_saves] the base policy is empty");
  check_ops(regions);
  std::vector<OpPlan> plans(regions.size());
  std::vector<Item> items;
  std::vector<std::pair<size_t, size_t>> owner;  // per item: its region and op
  int64_t must_keep = 0;
  for (size_t r = 0; r < regions.size(); ++r) {
    for (size_t i : open_ops(regions[r], base, plans[r])) {
      items.push_back({regions[r][i].output.nbytes(), regions[r][i].flops});
      owner.emplace_back(r, i);
    }
    must_keep += plans[r].kept_bytes;
  }
  EMBER_CHECK(must_keep <= budget_bytes, "[plan_op_saves] the base policy's MustSave ops keep ", must_keep,
              " bytes, more than the budget of ", budget_bytes);
  for (size_t t : knapsack(items, budget_bytes - must_keep)) keep(plans[owner[t].first], regions[owner[t].first][owner[t].second]);
  for (OpPlan& plan : plans)
    std::sort(plan.kept.begin(), plan.kept.end(),
              [](const OpPlan::Kept& a, const OpPlan::Kept& b) { return a.index < b.index; });
  return plans;
}

namespace {

// Every layer's input in a step on `sample`, without the graph (but requiring grad where the
// step's does, so that a profile records the same ops).
std::vector<Tensor> layer_inputs(const LayerChain& chain, const Tensor& sample) {
  const UntracedStep no_trace(std::vector<Tensor>{});
  std::vector<Tensor> inputs;
  Tensor h = sample;
  for (const LayerChain::Link& link : chain.links) {
    inputs.push_back(h);
    const Tensor out = link.forward(h);
    h = out.detach().requires_grad_(out.requires_grad());
  }
  return inputs;
}

}  // namespace

SelectivePlan plan_selective(const LayerChain& chain, const Tensor& sample, int64_t budget_bytes) {
  return plan_selective(chain, profile_layers(chain, sample), sample, budget_bytes);
}

SelectivePlan plan_selective(const LayerChain& chain, const std::vector<LayerProfile>& profile, const Tensor& sample,
                             int64_t budget_bytes) {
  EMBER_CHECK(profile.size() == chain.size(), "[plan_selective] the profile has ", profile.size(),
              " layer(s) but the chain has ", chain.size());
  const int64_t smallest = min_feasible_budget(profile);
  EMBER_CHECK(budget_bytes >= smallest, "[plan_selective] no plan fits a budget of ", memory::format_bytes(budget_bytes),
              " (", budget_bytes, " bytes); the smallest feasible budget for this model and input is ",
              memory::format_bytes(smallest), " (", smallest, " bytes)");
  const std::vector<Tensor> inputs = layer_inputs(chain, sample);
  std::map<std::pair<size_t, size_t>, std::vector<OpInfo>> profiled;  // by segment
  SelectivePlan best;
  // The segment plans from the budget's down to the smallest feasible one, each with the rest of
  // the budget spent on kept ops (see the Note).
  for (int64_t segments_budget = budget_bytes; segments_budget >= smallest;) {
    SelectivePlan plan;
    plan.segments = plan_checkpoints(profile, segments_budget);
    std::vector<std::vector<OpInfo>> regions;
    std::vector<size_t> region_segment;
    for (size_t s = 0; s < plan.segments.segments.size(); ++s) {
      const CheckpointPlan::Segment segment = plan.segments.segments[s];
      if (!segment.checkpointed) continue;
      std::vector<OpInfo>& ops = profiled[{segment.begin, segment.end}];
      if (ops.empty()) {
        const std::function<Tensor(const Tensor&)> forward = segment_forward(chain, segment);
        ops = profile_ops([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{forward(in[0])}; },
                          {inputs[segment.begin]});
      }
      regions.push_back(ops);
      region_segment.push_back(s);
    }
    plan.ops.resize(plan.segments.segments.size());
    std::vector<OpPlan> kept = plan_op_saves(regions, budget_bytes - plan.segments.predicted_peak_bytes);
    for (size_t r = 0; r < kept.size(); ++r) plan.ops[region_segment[r]] = std::move(kept[r]);
    plan.predicted_peak_bytes = plan.segments.predicted_peak_bytes;
    for (const OpPlan& p : plan.ops) {
      plan.predicted_peak_bytes += p.kept_bytes;
      plan.recompute_flops += p.recompute_flops;
    }
    segments_budget = plan.segments.predicted_peak_bytes - 1;  // the next plan keeps less
    if (best.ops.empty() || plan.recompute_flops < best.recompute_flops) best = std::move(plan);
  }
  return best;
}

Tensor run_plan(const LayerChain& chain, const SelectivePlan& plan, const Tensor& x, CheckpointOptions options) {
  EMBER_CHECK(plan.ops.size() == plan.segments.segments.size(), "[run_plan] the plan has ", plan.ops.size(),
              " op plans for ", plan.segments.segments.size(), " segments");
  return run_plan(chain, plan.segments, x, [&](size_t segment) {
    options.policy = planned_policy(plan.ops[segment]);
    return options;
  });
}

std::string SelectivePlan::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CheckpointPlan::Segment& s = segments.segments[i];
    os << (i ? " | " : "") << '[' << s.begin << ',' << s.end << ") ";
    if (!s.checkpointed) os << "plain";
    else os << "ckpt, " << ops[i].str();
  }
  return os.str();
}

std::string OpPlan::str() const {
  std::map<std::string, int> by_name;
  for (const Kept& k : kept) ++by_name[k.name];
  std::ostringstream os;
  os << "keep";
  if (kept.empty()) os << " nothing";
  bool first = true;
  for (const auto& [name, count] : by_name) {
    os << (first ? " " : ", ") << count << " " << name;
    first = false;
  }
  os << ": " << kept_bytes << " bytes, " << saved_flops << " of " << saved_flops + recompute_flops << " flops saved";
  return os.str();
}

CheckpointPolicy planned_policy(const OpPlan& plan, const CheckpointPolicy& base) {
  EMBER_CHECK(base, "[planned_policy] the base policy is empty");
  std::map<int64_t, std::string> kept;
  for (const OpPlan::Kept& k : plan.kept) kept.emplace(k.index, k.name);
  return [kept = std::move(kept), base](const OpInfo& op) {
    const CheckpointDecision d = base(op);
    if (is_must(d)) return d;
    const auto it = kept.find(op.index);
    return it != kept.end() && it->second == op.name ? CheckpointDecision::PreferSave
                                                       : CheckpointDecision::PreferRecompute;
  };
}

}  // namespace ember::utils
