#pragma once
// Note [Scoped thread-local settings]
// Grad mode, the recompute flag, the op label, the op observer and the graph region are each a
// thread_local that a guard sets for a scope and puts back afterwards, so guards nest and an
// exception unwinds them. ScopedValue is that guard once; each setting names its own guard type
// (GradModeGuard, RecomputeGuard, ...) as a thin class over it, so call sites read as what they set.
namespace ember {

template <class T>
class ScopedValue {
 public:
  ScopedValue(T& slot, T value) : slot_(slot), previous_(slot) { slot_ = value; }
  ~ScopedValue() { slot_ = previous_; }
  ScopedValue(const ScopedValue&) = delete;
  ScopedValue& operator=(const ScopedValue&) = delete;

 private:
  T& slot_;
  T previous_;
};

}  // namespace ember
