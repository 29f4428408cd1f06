// Note [Checkpoint planning]
// Memory model. The profile (Note [Profiling a step] in utils/layer_profile.cpp) measured one plain
// step module by module, in bytes above what was live before it: L(i) after module i's forward,
// F(i) the peak during that forward, B(i) the peak while backward was inside module i. A plan cuts
// the modules into segments; after the forward a plain segment [a, b) still keeps
// L(b-1) - L(a-1), a checkpointed one only its output. Let K be what the segments before [a, b)
// keep. While the step is in module i of [a, b), forward or backward, the plain step held
// L(a-1) for the modules before a where the plan holds K, and everything else is the same in both:
// the segment's own activations (recomputed, if it is checkpointed), the gradient flowing back,
// the nodes' temporaries, the parameter gradients made so far. So a plain segment peaks at
//     K + max_{a <= i < b} max(F(i), B(i)) - L(a-1),
// which does not change when a plain run is cut anywhere. A checkpointed segment has two more
// things in it:
//  * the recompute. Backward first needs one of the segment's saved tensors in module r, the last
//    that saved one, and the recompute runs the forward up to r (it stops after the last saved
//    tensor). It adds max_{a <= j <= r} F(j) - L(a-1) to what backward holds at that moment, which
//    is at most U(r) - G(r): U(r), the live bytes of the plain step at that same moment (the
//    profile's live_at_first_use), less G(r), what the plain step's forward still kept there. G(r)
//    is at least L(r) less module r's output, which may be gone by then (an output only the next
//    module saved is: that module's backward has run). Where module r saved its own output
//    (saves_own_output, as a ReLU does) the plain step still holds it, through that save, which
//    the checkpoint replaces with a handle, so G(r) counts it too; but not for the chain's last
//    module, whose output its caller holds in both steps. B(r) would bound the recompute too, but backward's peak in the module comes later,
//    once the module's gradients are made, and counting it here as well as in the segment's peak
//    overcounted a GPT block by the 12 MiB of its attention's gradients; counting a ReLU's output
//    as gone overcounted a Linear + ReLU block by one activation.
//  * its input. The checkpoint holds it until the segment's backward is done; the plain step may
//    have freed it already (when no module saved it), so it counts again.
// The predicted peak is the largest segment peak, or what all segments keep after the forward
// if that is more. It is an upper bound of the measured peak, not an estimate: every term is a
// measured peak or live count, or bounds one. It overcounts the output of a checkpointed segment
// that the next module does not save (it is freed, but stays in K).
//
// Cost. A checkpointed segment costs the forward work of modules a..r: the profile's count of
// arithmetic operations, the same on every run, so the same profile always gives the same plan
// (a measured time would let noise pick between plans that cost almost the same).
//
// Search. Walking the cut points left to right, a partial plan is summarised by (kept bytes so
// far, recompute so far), and a segment can follow it iff kept + its peak term and kept + what it
// keeps both fit the budget. Keeping, at every cut point, the Pareto frontier of those pairs (no
// pair with both fewer bytes and less recompute) makes the dynamic program exact for this model:
// the plan it returns has the least recompute of all plans whose predicted peak fits.
#include "utils/planner.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/allocator.h"

namespace ember::utils {

namespace {

// What a segment adds to the step: its peak term (on top of what the segments before it keep),
// what it keeps after the forward, and the work and time of its recompute.
struct SegmentCost {
  int64_t high = 0, kept = 0, flops = 0;
  double ms = 0;
};

// The Note's model for every segment [a, b), plain and checkpointed.
// A profile may be made by hand (LayerProfile is a plain struct): before the table adds a few of
// its numbers together, each must be a count (>= 0) and all of them together far from int64's
// end, so that no sum the plans make can overflow.
void check_profile(const std::vector<LayerProfile>& l) {
  double bytes = 0, flops = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    const LayerProfile& m = l[i];
    for (int64_t v : {m.live_after, m.output_bytes, m.forward_peak, m.backward_peak, m.live_at_first_use,
                      m.forward_flops})
      EMBER_CHECK(v >= 0, "[plan_checkpoints] layer ", i, " ('", m.name, "') has a negative byte count or work (", v,
                  ")");
    EMBER_CHECK(std::isfinite(m.forward_ms) && m.forward_ms >= 0, "[plan_checkpoints] layer ", i, " ('", m.name,
                "') has a forward time of ", m.forward_ms, " ms");
    bytes += static_cast<double>(m.live_after) + static_cast<double>(m.output_bytes) +
             static_cast<double>(m.forward_peak) + static_cast<double>(m.backward_peak) +
             static_cast<double>(m.live_at_first_use);
    flops += static_cast<double>(m.forward_flops);
  }
  EMBER_CHECK(bytes < 0x1p60 && flops < 0x1p60, "[plan_checkpoints] the profile's ", l.size(),
              " layers add up to more than 2^60 bytes or operations: not the profile of a step that runs");
}

struct SegmentTable {
  std::vector<std::vector<SegmentCost>> plain, checkpointed;  // [a][b]

  explicit SegmentTable(const std::vector<LayerProfile>& l) {
    check_profile(l);
    const size_t n = l.size();
    plain.assign(n, std::vector<SegmentCost>(n + 1));
    checkpointed.assign(n, std::vector<SegmentCost>(n + 1));
    for (size_t a = 0; a < n; ++a) {
      const int64_t before = a == 0 ? 0 : l[a - 1].live_after;
      const int64_t input = a > 0 && !l[a - 1].output_saved ? l[a - 1].output_bytes : 0;
      int64_t step_high = 0, forward_high = 0, flops = 0;
      double ms = 0;
      SegmentCost recompute;  // through the last module so far that saved a tensor
      for (size_t b = a + 1; b <= n; ++b) {
        const LayerProfile& m = l[b - 1];
        step_high = std::max({step_high, m.forward_peak, m.backward_peak});
        forward_high = std::max(forward_high, m.forward_peak);
        flops += m.forward_flops;
        ms += m.forward_ms;
        const int64_t output_gone = m.saves_own_output && b < n ? 0 : m.output_bytes;
        if (m.saves) recompute = {forward_high + m.live_at_first_use - m.live_after + output_gone, 0, flops, ms};
        plain[a][b] = {step_high - before, m.live_after - before, 0, 0.0};
        const int64_t high = std::max(step_high, recompute.high) - before;
        checkpointed[a][b] = {input + high, m.output_bytes, recompute.flops, recompute.ms};
      }
    }
  }
};

struct Prefix {
  int64_t kept, flops;
  double ms;
  // how we got here: the previous cut point, the entry there, and whether [prev, here) is checkpointed
  size_t prev_cut, prev_entry;
  bool checkpointed;
};

void keep_frontier(std::vector<Prefix>& v) {
  std::sort(v.begin(), v.end(), [](const Prefix& x, const Prefix& y) {
    if (x.kept != y.kept) return x.kept < y.kept;
    if (x.flops != y.flops) return x.flops < y.flops;
    if (x.prev_cut != y.prev_cut) return x.prev_cut < y.prev_cut;
    return x.checkpointed != y.checkpointed ? x.checkpointed < y.checkpointed : x.prev_entry < y.prev_entry;
  });
  std::vector<Prefix> out;
  for (const Prefix& p : v)
    if (out.empty() || p.flops < out.back().flops) out.push_back(p);
  v = std::move(out);
}

// The frontiers at every cut point 0..n for `budget`.
std::vector<std::vector<Prefix>> frontiers(const SegmentTable& table, size_t n, int64_t budget) {
  std::vector<std::vector<Prefix>> at(n + 1);
  at[0].push_back({0, 0, 0.0, 0, 0, false});
  for (size_t a = 0; a < n; ++a) {
    keep_frontier(at[a]);
    for (size_t e = 0; e < at[a].size(); ++e) {
      const Prefix& p = at[a][e];
      for (size_t b = a + 1; b <= n; ++b)
        for (const bool checkpointed : {false, true}) {
          const SegmentCost& s = checkpointed ? table.checkpointed[a][b] : table.plain[a][b];
          if (p.kept + s.high <= budget && p.kept + s.kept <= budget)
            at[b].push_back({p.kept + s.kept, p.flops + s.flops, p.ms + s.ms, a, e, checkpointed});
        }
    }
  }
  keep_frontier(at[n]);
  return at;
}

int64_t predicted_peak(const SegmentTable& table, const CheckpointPlan& plan) {
  int64_t kept = 0, peak = 0;
  for (const auto& s : plan.segments) {
    const SegmentCost& c = s.checkpointed ? table.checkpointed[s.begin][s.end] : table.plain[s.begin][s.end];
    peak = std::max(peak, kept + c.high);
    kept += c.kept;
  }
  return std::max(peak, kept);
}

// A plan's segments must cover layers 0 .. layers-1 in order, each once: a gap would skip a
// layer and an overlap run one twice, silently.
void check_plan(size_t layers, const CheckpointPlan& plan, const char* op) {
  size_t next = 0;
  for (const auto& s : plan.segments) {
    EMBER_CHECK(s.begin == next && s.end > s.begin && s.end <= layers, "[", op, "] segment [", s.begin, ",", s.end,
                ") does not continue a plan that covers [0,", next, ") of ", layers, " layer(s)");
    next = s.end;
  }
  EMBER_CHECK(next == layers, "[", op, "] the plan covers ", next, " layer(s) of ", layers);
}

}  // namespace

std::function<Tensor(const Tensor&)> segment_forward(const LayerChain& chain, CheckpointPlan::Segment segment) {
  return chain.segment(segment.begin, segment.end);
}

int64_t predicted_peak(const std::vector<LayerProfile>& l, const CheckpointPlan& plan) {
  check_plan(l.size(), plan, "predicted_peak");
  return predicted_peak(SegmentTable(l), plan);
}

int64_t min_feasible_budget(const std::vector<LayerProfile>& l) {
  EMBER_CHECK(!l.empty(), "[plan_checkpoints] no layers to plan for");
  const SegmentTable table(l);
  // No checkpointing is always a plan: its prediction is feasible.
  int64_t lo = 0, hi = predicted_peak(table, CheckpointPlan{{{0, l.size(), false}}});
  while (lo < hi) {  // feasibility is monotone in the budget
    const int64_t mid = lo + (hi - lo) / 2;
    if (frontiers(table, l.size(), mid).back().empty()) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

CheckpointPlan plan_checkpoints(const std::vector<LayerProfile>& l, int64_t budget) {
  EMBER_CHECK(!l.empty(), "[plan_checkpoints] no layers to plan for");
  const SegmentTable table(l);
  std::vector<std::vector<Prefix>> at = frontiers(table, l.size(), budget);
  if (at.back().empty()) {
    const int64_t smallest = min_feasible_budget(l);
    EMBER_FAIL("[plan_checkpoints] no plan fits a budget of ", memory::format_bytes(budget), " (", budget,
               " bytes); the smallest feasible budget for this model and input is ", memory::format_bytes(smallest),
               " (", smallest, " bytes)");
  }
  // The frontier is sorted by kept bytes with falling recompute: its last entry recomputes least.
  CheckpointPlan plan;
  size_t cut = l.size(), entry = at.back().size() - 1;
  plan.recompute_flops = at.back()[entry].flops;
  plan.recompute_ms = at.back()[entry].ms;
  while (cut > 0) {
    const Prefix& p = at[cut][entry];
    const bool merges = !p.checkpointed && !plan.segments.empty() && !plan.segments.back().checkpointed;
    if (merges) plan.segments.back().begin = p.prev_cut;  // adjacent plain runs are one plain run
    else plan.segments.push_back({p.prev_cut, cut, p.checkpointed});
    cut = p.prev_cut;
    entry = p.prev_entry;
  }
  std::reverse(plan.segments.begin(), plan.segments.end());
  plan.predicted_peak_bytes = predicted_peak(table, plan);
  return plan;
}

std::string CheckpointPlan::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < segments.size(); ++i)
    os << (i ? " | " : "") << '[' << segments[i].begin << ',' << segments[i].end << ") "
       << (segments[i].checkpointed ? "ckpt" : "plain");
  return os.str();
}

Tensor run_plan(const LayerChain& chain, const CheckpointPlan& plan, const Tensor& x, const CheckpointOptions& options) {
  return run_plan(chain, plan, x, [&options](size_t) { return options; });
}

Tensor run_plan(const LayerChain& chain, const CheckpointPlan& plan, const Tensor& x,
                const std::function<CheckpointOptions(size_t segment)>& options_of) {
  check_plan(chain.size(), plan, "run_plan");
  Tensor out = x;
  for (size_t i = 0; i < plan.segments.size(); ++i) {
    const CheckpointPlan::Segment s = plan.segments[i];
    out = s.checkpointed ? checkpoint(segment_forward(chain, s), out, options_of(i)) : segment_forward(chain, s)(out);
  }
  return out;
}

Tensor checkpoint_sequential(const LayerChain& chain, MemoryBudget budget, const Tensor& x,
                             const CheckpointOptions& options) {
  return run_plan(chain, plan_checkpoints(profile_layers(chain, x), budget.bytes), x, options);
}

}  // namespace ember::utils
