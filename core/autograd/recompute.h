#pragma once
// Whether the current thread is re-running a forward to recompute activations dropped by
// activation checkpointing (utils::checkpoint sets it). Modules with side effects — BatchNorm's
// running statistics — consult it so that a checkpointed step updates them exactly once.
// It lives in core so that nn can read it without depending on utils.
#include "core/scoped_value.h"

namespace ember::autograd {

namespace detail {
inline thread_local bool recomputing = false;
}

inline bool is_recomputing() { return detail::recomputing; }

class RecomputeGuard : ScopedValue<bool> {
 public:
  RecomputeGuard() : ScopedValue(detail::recomputing, true) {}
};

}  // namespace ember::autograd
