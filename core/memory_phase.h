#pragma once
// What the current thread is doing, for an OutOfMemoryError (core/out_of_memory.h) to say where
// the memory wall was met. The autograd state tells a forward, a backward and the recompute of a
// checkpointed region apart by itself (core/autograd/op_label.h, core/autograd/recompute.h);
// code that allocates outside those names its phase with a guard: the optimizers' step
// ("optimizer step"), a DataLoader making a batch ("data loading").
#include "core/scoped_value.h"

namespace ember::memory {

namespace detail {
inline thread_local const char* phase = nullptr;
}

inline const char* current_phase() { return detail::phase; }

// The phases the autograd state tells apart by itself, as OutOfMemoryError names them; the memory
// snapshot (utils/memory_snapshot.h) draws the last two.
inline constexpr char kForwardPhase[] = "forward";
inline constexpr char kBackwardPhase[] = "backward";
inline constexpr char kRecomputePhase[] = "recompute of a checkpointed region";

class PhaseGuard : ScopedValue<const char*> {
 public:
  explicit PhaseGuard(const char* phase) : ScopedValue(detail::phase, phase) {}
};

}  // namespace ember::memory
