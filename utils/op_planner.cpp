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
// The model leaves out early stop: the ops after a region's last saved tensor are never
// recomputed, so keeping them saves nothing, yet the plan may count them (they are usually cheap:
// a residual add). What the plan adds to a step's memory: each checkpointed region holds at most
// its kept_bytes more than without a policy, until its recompute, and its recompute allocates no
// more than without (a replayed op allocates nothing); so the segment planner's predicted peak plus
// kept_bytes for each checkpointed segment bounds the peak of a step that runs both plans.
#include "utils/op_planner.h"

#include <algorithm>
#include <map>
#include <sstream>

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
  int item;    // the op it took last, or -1
  int parent;  // the choice it extended, or -1
};

}  // namespace

std::vector<OpInfo> profile_ops(const MultiFunction& fn, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(fn, "[profile_ops] the function is empty");
  return seen_by_a_policy([&](const CheckpointOptions& options) { checkpoint(fn, inputs, options); });
}

std::vector<OpInfo> profile_ops(nn::Module& module, const Tensor& input) {
  return seen_by_a_policy([&](const CheckpointOptions& options) { checkpoint(module, input, options); });
}

OpPlan plan_op_saves(const std::vector<OpInfo>& ops, int64_t budget_bytes, const CheckpointPolicy& base) {
  EMBER_CHECK(budget_bytes >= 0, "[plan_op_saves] the budget must be at least 0 bytes, got ", budget_bytes);
  EMBER_CHECK(base, "[plan_op_saves] the base policy is empty");
  OpPlan plan;
  std::vector<int> items;
  int64_t total_flops = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpInfo& op = ops[i];
    total_flops += op.flops;
    const CheckpointDecision d = base(op);
    if (d == CheckpointDecision::MustSave) {
      EMBER_CHECK(op.replayable, "[plan_op_saves] the base policy says MustSave for op ", op.index, " (", op.name,
                  "), which cannot be replayed: the checkpoint would refuse it");
      plan.kept.push_back({op.index, op.name});
      plan.kept_bytes += op.output.nbytes();
      plan.saved_flops += op.flops;
    } else if (!is_must(d) && op.replayable && op.flops > 0) {
      items.push_back(static_cast<int>(i));
    }
  }
  EMBER_CHECK(plan.kept_bytes <= budget_bytes, "[plan_op_saves] the base policy's MustSave ops keep ", plan.kept_bytes,
              " bytes, more than the budget of ", budget_bytes);

  std::vector<Choice> choices{{plan.kept_bytes, 0, -1, -1}};
  std::vector<int> frontier{0};  // by bytes, with strictly more work saved at every step
  for (int item : items) {
    const int64_t bytes = ops[static_cast<size_t>(item)].output.nbytes(), flops = ops[static_cast<size_t>(item)].flops;
    std::vector<int> next = frontier;
    for (int c : frontier)
      if (choices[static_cast<size_t>(c)].bytes + bytes <= budget_bytes) {
        const Choice& from = choices[static_cast<size_t>(c)];
        choices.push_back({from.bytes + bytes, from.flops + flops, item, c});
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
  std::vector<int> taken;
  for (int c = frontier.back(); choices[static_cast<size_t>(c)].item >= 0; c = choices[static_cast<size_t>(c)].parent)
    taken.push_back(choices[static_cast<size_t>(c)].item);
  for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
    const OpInfo& op = ops[static_cast<size_t>(*it)];
    plan.kept.push_back({op.index, op.name});
  }
  std::sort(plan.kept.begin(), plan.kept.end(), [](const OpPlan::Kept& a, const OpPlan::Kept& b) { return a.index < b.index; });
  plan.kept_bytes = choices[static_cast<size_t>(frontier.back())].bytes;
  plan.saved_flops += choices[static_cast<size_t>(frontier.back())].flops;
  plan.recompute_flops = total_flops - plan.saved_flops;
  return plan;
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
