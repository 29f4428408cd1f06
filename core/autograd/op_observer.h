#pragma once
// Note [Op observers]
// A thread-local observer sees every op applied on this thread that records into the autograd
// graph: before it runs (with its tensor arguments) and after (with its output). Returning a
// tensor from before() skips the op and uses that tensor as its output. Selective activation
// checkpointing uses this to keep the outputs of expensive ops in the forward and to replay them
// instead of recomputing them. Only top-level recording ops are observed: ops that an op runs
// inside its own forward are not, so skipping an op never changes which ops the observer sees
// next, and neither are side computations under NoGradGuard (BatchNorm's running statistics),
// which a recompute legitimately skips. Neither are multi-output ops (Note [Multi-output
// functions]): an observer deals in one output per op, so selective checkpointing never keeps
// them and recomputes them like any op it does not keep.
//
// This header is only the hook: the interface, its thread-local slot and run_observed, which
// Function::apply (core/autograd/function.h) calls. It lives in core because apply does, and
// core never includes utils. The observers live with the code that installs them, in utils: the
// checkpoint Recorder and Replayer (utils/checkpoint.cpp) and the layer profiler's WorkCounter
// (utils/layer_profile.cpp).
#include <optional>
#include <vector>

#include "core/scoped_value.h"
#include "core/tensor.h"

namespace ember::autograd {

struct OpObserver {
  virtual ~OpObserver() = default;
  virtual std::optional<Tensor> before(const char* op, const std::vector<Tensor>& args) = 0;
  virtual void after(const char* op, const Tensor& output) = 0;
};

namespace detail {
inline thread_local OpObserver* op_observer = nullptr;
}

// Installs an observer (or none) for the guard's lifetime.
class OpObserverGuard : ScopedValue<OpObserver*> {
 public:
  explicit OpObserverGuard(OpObserver* observer) : ScopedValue(detail::op_observer, observer) {}
};

namespace detail {

// Runs one top-level op, `run()`, under `observer`: before() may replace it, after() sees its
// output. Ops that `run` applies inside itself are not observed (they are the op's business).
template <class Run>
Tensor run_observed(OpObserver& observer, const char* op, const std::vector<Tensor>& args, Run&& run) {
  if (std::optional<Tensor> replayed = observer.before(op, args)) return *replayed;
  Tensor out;
  {
    OpObserverGuard top_level_only(nullptr);
    out = run();
  }
  observer.after(op, out);
  return out;
}

}  // namespace detail

}  // namespace ember::autograd
