#pragma once
// What the current thread is computing: the op whose forward (or whose node's backward) runs
// now. The memory timeline labels allocator events with it.
#include "core/scoped_value.h"

namespace ember::autograd {

struct OpLabel {
  const char* op = nullptr;  // nullptr outside any op
  bool backward = false;
};

namespace detail {
inline thread_local OpLabel current_label;
}

inline OpLabel current_op_label() { return detail::current_label; }

class OpLabelGuard : ScopedValue<OpLabel> {
 public:
  OpLabelGuard(const char* op, bool backward) : ScopedValue(detail::current_label, {op, backward}) {}
};

}  // namespace ember::autograd
