#pragma once
// What the current thread is computing: the op whose forward (or whose node's backward) runs
// now. The memory timeline labels allocator events with it.
namespace ember::autograd {

struct OpLabel {
  const char* op = nullptr;  // nullptr outside any op
  bool backward = false;
};

namespace detail {
inline thread_local OpLabel current_label;
}

inline OpLabel current_op_label() { return detail::current_label; }

class OpLabelGuard {
 public:
  OpLabelGuard(const char* op, bool backward) : previous_(detail::current_label) {
    detail::current_label = {op, backward};
  }
  ~OpLabelGuard() { detail::current_label = previous_; }
  OpLabelGuard(const OpLabelGuard&) = delete;
  OpLabelGuard& operator=(const OpLabelGuard&) = delete;

 private:
  OpLabel previous_;
};

}  // namespace ember::autograd
