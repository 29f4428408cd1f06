// Note [Planning for a memory limit]
// A limit caps the bytes the device's allocator holds (Note [Memory limits]); the planner bounds
// the live bytes a training step adds (Note [Checkpoint planning]). Between the two lie:
//  * what the step holds whatever it checkpoints: the parameters, the batch and anything else
//    live when the plan is made, plus what is not live yet but will be during the step: the
//    optimizer's state before its first step (Optimizer::full_state_bytes), the batches a
//    loader's workers prefetch meanwhile on the same device. That is `held`;
//  * the allocator's blocks, which are bigger than the tensors in them: sizes are rounded up to a
//    class, and a cached block serves requests up to half its size (Allocator::reuses). When a
//    request meets the limit the cache is given back, but a live tensor in a bigger block keeps
//    it. A sixteenth of the limit is left for that: `headroom`. The tests train under limits of
//    0.6, 0.4 and 0.25 times a plain step's peak with it (tests/test_limit_plan.cpp); an eighth
//    was more than they needed.
// What is left, limit - held - headroom, is the step budget: what budget=MB would have been given.
// The profile that plans it is one plain step, which by definition does not fit under the limit
// when checkpointing is needed; the limit is lifted while it runs (with_limit_lifted): it is
// ember's own, and the profile's memory is given back before the limit returns. On a card that
// cannot hold a plain step at all, profile with a smaller batch.
#include "utils/limit_plan.h"

#include <algorithm>

#include "core/allocator.h"
#include "core/check.h"
#include "core/memory_limit.h"
#include "utils/planner.h"

namespace ember::utils {

namespace {
constexpr int64_t kHeadroomShare = 16;  // the headroom is limit / kHeadroomShare
}

int64_t LimitBudget::limit_for(int64_t budget) const {
  const int64_t needed = held + budget;
  return (needed * kHeadroomShare + kHeadroomShare - 2) / (kHeadroomShare - 1);
}

std::string LimitBudget::shortfall(Device device, int64_t least) const {
  return ember::detail::concat("under the limit of ", memory::format_bytes(limit), " on ", device.str(),
                               ": it leaves the step ", memory::format_bytes(std::max<int64_t>(step_budget(), 0)),
                               ", and the least a step needs is ", memory::format_bytes(least),
                               "; the smallest limit that would work is ", memory::format_bytes(limit_for(least)), " (",
                               limit_for(least), " bytes)");
}

std::optional<LimitBudget> budget_under_limit(Device device, int64_t to_come) {
  EMBER_CHECK(to_come >= 0, "[budget_under_limit] bytes to come must not be negative, got ", to_come);
  const std::optional<int64_t> limit = memory::limit(device);
  if (!limit) return std::nullopt;
  return LimitBudget{*limit, memory::stats(device).live_bytes + to_come, *limit / kHeadroomShare};
}

void with_limit_lifted(Device device, const std::function<void()>& fn) {
  const std::optional<int64_t> limit = memory::limit(device);
  if (!limit) return fn();
  memory::clear_limit(device);
  try {
    fn();
  } catch (...) {
    memory::set_limit(device, *limit);
    throw;
  }
  memory::set_limit(device, *limit);
}

SelectivePlan plan_for_limit(const LayerChain& chain, const Tensor& sample, int64_t to_come) {
  EMBER_CHECK(sample.defined(), "[plan_for_limit] the sample is undefined");
  const Device device = sample.device();
  const std::optional<LimitBudget> under = budget_under_limit(device, to_come);
  std::vector<LayerProfile> profile;
  with_limit_lifted(device, [&] { profile = profile_layers(chain, sample); });
  SelectivePlan plain;
  plain.segments.segments = {{0, profile.size(), false}};
  plain.segments.predicted_peak_bytes = plain.predicted_peak_bytes = predicted_peak(profile, plain.segments);
  plain.ops.resize(1);
  if (!under || under->step_budget() >= plain.predicted_peak_bytes) return plain;
  const int64_t smallest = min_feasible_budget(profile);
  EMBER_CHECK(under->step_budget() >= smallest, "[plan_for_limit] no checkpointing fits a step ",
              under->shortfall(device, smallest));
  SelectivePlan plan;
  with_limit_lifted(device, [&] { plan = plan_selective(chain, profile, sample, under->step_budget()); });
  return plan;
}

}  // namespace ember::utils
