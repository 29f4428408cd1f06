#pragma once
// Grad mode is thread-local: a DataLoader worker or an optimizer step under NoGradGuard does not
// change whether the training thread records a graph.
namespace ember {

namespace detail {
inline thread_local bool grad_enabled = true;
}

inline bool is_grad_enabled() { return detail::grad_enabled; }

class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(detail::grad_enabled) { detail::grad_enabled = enabled; }
  ~GradModeGuard() { detail::grad_enabled = previous_; }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

struct NoGradGuard : GradModeGuard {
  NoGradGuard() : GradModeGuard(false) {}
};
struct EnableGradGuard : GradModeGuard {
  EnableGradGuard() : GradModeGuard(true) {}
};

}  // namespace ember
