// Note [Checkpoint planning]
// Memory model. Let L(i) be the live bytes after layer i in a plain forward (the profile), so a
// plain run of layers [a, b) adds full(a, b) = L(b-1) - L(a-1). A plan cuts the layers into
// segments; after the forward a plain segment still holds full(a, b), a checkpointed one only
// its output. Backward visits the segments in reverse; when it reaches segment k, everything
// kept by segments before k is still alive, and segment k's activations are back in full
// (recomputed if it was checkpointed). Backward also leaves a gradient for every trainable
// parameter it passes (zero_grad sets them to none by default, so none is alive before the
// step). When backward is at layer i of segment [a, b), the activations of layers a..i are alive
// and so are the gradients of layers i onwards, grads(i); the segment's high water is
//     high_k = max_{a <= i < b} ( full(a, i+1) + grads(i) ),
// and the predicted peak is
//     max( sum_k kept_k ,  max_k ( sum_{j<k} kept_j + high_k ) ).
// Counting layer by layer, rather than all of a segment's activations next to all the gradients
// of its layers, keeps the prediction independent of how a plain run is cut into segments.
// The recompute cost is the forward time of the checkpointed layers.
//
// Search. Walking the cut points left to right, a partial plan is summarised by (kept bytes so
// far, recompute so far), and a segment [a, b) can follow it iff kept + full(a, b) <= budget.
// Keeping, at every cut point, the Pareto frontier of those pairs (no pair with both fewer bytes
// and less recompute) makes the dynamic program exact for this model: the plan it returns has
// the least recompute of all plans whose predicted peak fits. The model itself ignores the
// gradients flowing back between layers and the transient buffers inside a layer; the demo
// prints predicted against measured peaks so the gap is visible.
#include "utils/planner.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/recompute.h"
#include "core/generator.h"

namespace ember::utils {

std::vector<LayerProfile> profile_layers(nn::ModuleList& seq, const Tensor& sample) {
  EMBER_CHECK(seq.size() > 0, "[profile_layers] the Sequential is empty");
  RngStateGuard keep_generators;
  autograd::RecomputeGuard no_side_effects;  // BatchNorm leaves its running statistics alone
  EnableGradGuard grad_on;
  const Device device = sample.device();
  const int64_t base = memory::stats(device).live_bytes;
  std::vector<LayerProfile> layers;
  Tensor out = sample;
  for (size_t i = 0; i < seq.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    out = seq[i](out);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    int64_t grad_bytes = 0;
    for (const Tensor& p : seq[i].parameters())
      if (p.requires_grad()) grad_bytes += static_cast<int64_t>(p.nbytes());
    layers.push_back(
        {seq[i].name(), memory::stats(device).live_bytes - base, static_cast<int64_t>(out.nbytes()), grad_bytes, ms});
  }
  return layers;
}

namespace {

struct Prefix {
  int64_t kept;
  double recompute;
  // how we got here: the previous cut point, the entry there, and whether [prev, here) is checkpointed
  size_t prev_cut, prev_entry;
  bool checkpointed;
};

int64_t full(const std::vector<LayerProfile>& l, size_t a, size_t b) {
  return l[b - 1].live_after - (a == 0 ? 0 : l[a - 1].live_after);
}

// grads(i): the parameter gradients of layers i onwards, which backward has made by layer i.
int64_t grads_from(const std::vector<LayerProfile>& l, size_t i) {
  int64_t bytes = 0;
  for (size_t j = i; j < l.size(); ++j) bytes += l[j].grad_bytes;
  return bytes;
}

// What segment [a, b + 1) holds at its high water, given `high` for [a, b) (see the Note).
int64_t extend_high_water(const std::vector<LayerProfile>& l, size_t a, size_t b, int64_t high) {
  return std::max(high, full(l, a, b + 1) + grads_from(l, b));
}

double forward_ms(const std::vector<LayerProfile>& l, size_t a, size_t b) {
  double ms = 0;
  for (size_t i = a; i < b; ++i) ms += l[i].forward_ms;
  return ms;
}

void keep_frontier(std::vector<Prefix>& v) {
  std::sort(v.begin(), v.end(), [](const Prefix& x, const Prefix& y) {
    return x.kept != y.kept ? x.kept < y.kept : x.recompute < y.recompute;
  });
  std::vector<Prefix> out;
  for (const Prefix& p : v)
    if (out.empty() || p.recompute < out.back().recompute) out.push_back(p);
  v = std::move(out);
}

// The frontiers at every cut point 0..n for `budget`.
std::vector<std::vector<Prefix>> frontiers(const std::vector<LayerProfile>& l, int64_t budget) {
  const size_t n = l.size();
  std::vector<std::vector<Prefix>> at(n + 1);
  at[0].push_back({0, 0.0, 0, 0, false});
  for (size_t a = 0; a < n; ++a) {
    keep_frontier(at[a]);
    for (size_t e = 0; e < at[a].size(); ++e) {
      const Prefix& p = at[a][e];
      int64_t high = 0;
      for (size_t b = a + 1; b <= n; ++b) {
        high = extend_high_water(l, a, b - 1, high);
        if (p.kept + high > budget) break;  // segment [a, b) does not fit, and longer ones neither
        const int64_t f = full(l, a, b);
        at[b].push_back({p.kept + f, p.recompute, a, e, false});
        at[b].push_back({p.kept + l[b - 1].output_bytes, p.recompute + forward_ms(l, a, b), a, e, true});
      }
    }
  }
  keep_frontier(at[n]);
  return at;
}

}  // namespace

int64_t predicted_peak(const std::vector<LayerProfile>& l, const CheckpointPlan& plan) {
  int64_t kept = 0, peak = 0;
  for (const auto& s : plan.segments) {
    int64_t high = 0;
    for (size_t i = s.begin; i < s.end; ++i) high = extend_high_water(l, s.begin, i, high);
    peak = std::max(peak, kept + high);
    kept += s.checkpointed ? l[s.end - 1].output_bytes : full(l, s.begin, s.end);
  }
  return std::max(peak, kept);
}

int64_t min_feasible_budget(const std::vector<LayerProfile>& l) {
  EMBER_CHECK(!l.empty(), "[plan_checkpoints] no layers to plan for");
  int64_t lo = 0, hi = std::max<int64_t>(l.back().live_after, 0);
  for (const LayerProfile& p : l) hi = std::max(hi, p.live_after + p.output_bytes);
  hi += grads_from(l, 0);
  while (lo < hi) {  // feasibility is monotone in the budget
    const int64_t mid = lo + (hi - lo) / 2;
    if (frontiers(l, mid).back().empty()) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

CheckpointPlan plan_checkpoints(const std::vector<LayerProfile>& l, int64_t budget) {
  EMBER_CHECK(!l.empty(), "[plan_checkpoints] no layers to plan for");
  std::vector<std::vector<Prefix>> at = frontiers(l, budget);
  if (at.back().empty())
    EMBER_FAIL("[plan_checkpoints] no plan fits a budget of ", memory::format_bytes(budget), " (", budget,
               " bytes); the smallest feasible budget for this model and input is ",
               memory::format_bytes(min_feasible_budget(l)), " (", min_feasible_budget(l), " bytes)");
  // The frontier is sorted by kept bytes with falling recompute: its last entry recomputes least.
  CheckpointPlan plan;
  size_t cut = l.size(), entry = at.back().size() - 1;
  plan.recompute_ms = at.back()[entry].recompute;
  while (cut > 0) {
    const Prefix& p = at[cut][entry];
    const bool merges = !p.checkpointed && !plan.segments.empty() && !plan.segments.back().checkpointed;
    if (merges) plan.segments.back().begin = p.prev_cut;  // adjacent plain runs are one plain run
    else plan.segments.push_back({p.prev_cut, cut, p.checkpointed});
    cut = p.prev_cut;
    entry = p.prev_entry;
  }
  std::reverse(plan.segments.begin(), plan.segments.end());
  plan.predicted_peak_bytes = predicted_peak(l, plan);
  return plan;
}

std::string CheckpointPlan::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < segments.size(); ++i)
    os << (i ? " | " : "") << '[' << segments[i].begin << ',' << segments[i].end << ") "
       << (segments[i].checkpointed ? "ckpt" : "plain");
  return os.str();
}

Tensor run_plan(nn::ModuleList& seq, const CheckpointPlan& plan, const Tensor& x, const CheckpointOptions& options) {
  EMBER_CHECK(!plan.segments.empty() && plan.segments.back().end == seq.size(), "[run_plan] the plan covers ",
              plan.segments.empty() ? 0 : plan.segments.back().end, " layer(s) but the Sequential has ", seq.size());
  Tensor out = x;
  for (const auto& s : plan.segments) {
    auto run = [&seq, s](const Tensor& in) {
      Tensor h = in;
      for (size_t i = s.begin; i < s.end; ++i) h = seq[i](h);
      return h;
    };
    out = s.checkpointed ? checkpoint(run, out, options) : run(out);
  }
  return out;
}

Tensor checkpoint_sequential(nn::ModuleList& seq, MemoryBudget budget, const Tensor& x,
                             const CheckpointOptions& options) {
  return run_plan(seq, plan_checkpoints(profile_layers(seq, x), budget.bytes), x, options);
}

}  // namespace ember::utils
