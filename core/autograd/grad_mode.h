#pragma once
// Grad mode is thread-local: a DataLoader worker or an optimizer step under NoGradGuard does not
// change whether the training thread records a graph.
#include "core/scoped_value.h"

namespace ember {

namespace detail {
inline thread_local bool grad_enabled = true;
}

inline bool is_grad_enabled() { return detail::grad_enabled; }

class GradModeGuard : ScopedValue<bool> {
 public:
  explicit GradModeGuard(bool enabled) : ScopedValue(detail::grad_enabled, enabled) {}
};

struct NoGradGuard : GradModeGuard {
  NoGradGuard() : GradModeGuard(false) {}
};
struct EnableGradGuard : GradModeGuard {
  EnableGradGuard() : GradModeGuard(true) {}
};

}  // namespace ember
