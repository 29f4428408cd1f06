#pragma once
// Checkpointing chosen from the device's memory limit (Note [Planning for a memory limit] in
// utils/limit_plan.cpp): what a training step may spend on activations when the limit is known,
// and the planner's choice for it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/device.h"
#include "utils/layer_chain.h"
#include "utils/op_planner.h"

namespace ember::utils {

struct LimitBudget {
  int64_t limit = 0;     // the device's limit (memory::limit)
  int64_t held = 0;      // what a step holds whatever it checkpoints: live now, plus what is to come
  int64_t headroom = 0;  // left free for the allocator's rounded and reused blocks
  // What the step's forward, loss and backward may add (what --checkpoint budget=MB bounds);
  // negative when the limit does not even hold `held`.
  int64_t step_budget() const { return limit - held - headroom; }
  // The smallest limit that leaves a step budget of `budget` with the same held bytes.
  int64_t limit_for(int64_t budget) const;
  // Why a step that needs at least `least` does not fit, for an error: "under the limit of 64.00 MiB
  // on cpu: it leaves the step 2.00 MiB, and the least a step needs is 3.00 MiB; the smallest limit
  // that would work is 65.07 MiB (68228710 bytes)".
  std::string shortfall(Device device, int64_t least) const;
};

// The budget under the device's limit, nullopt without one. `to_come`: bytes the step will hold
// that are not live yet (the optimizer's state before its first step, the batches a loader
// prefetches).
std::optional<LimitBudget> budget_under_limit(Device device, int64_t to_come = 0);

// The least recompute that fits a step of `chain` on `sample` under the device's limit:
// plan_selective with the step budget; a plan with nothing checkpointed without a limit or when
// a plain step fits. An ember::Error naming the smallest limit that would work when no plan fits.
// The prediction bounds what the chain adds above its input (Note [Checkpoint planning]): a loss
// or layers around the chain belong in `to_come`.
SelectivePlan plan_for_limit(const LayerChain& chain, const Tensor& sample, int64_t to_come = 0);

// Runs `fn` with the device's limit lifted, and puts it back: profiling a plain step to plan for a
// limit that the plain step does not fit under.
void with_limit_lifted(Device device, const std::function<void()>& fn);

}  // namespace ember::utils
