// Exercise 5: a checkpointed segment. Read exercises/README.md (exercise 5) first.
#include "ex5_checkpoint.h"

#include "not_implemented.h"

namespace ember::exercises {

// Function::apply runs forward under NoGradGuard: what do the segment's ops save then?
Tensor CheckpointSegment::forward(autograd::Ctx& c, State& s, const Segment& fn, const std::vector<Tensor>& inputs) {
  (void)c;
  (void)s;
  (void)fn;
  (void)inputs;
  not_implemented(5);
}

// The engine runs backward under NoGradGuard too: a recompute that should record needs a guard.
autograd::Grads CheckpointSegment::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  (void)c;
  (void)s;
  (void)g;
  not_implemented(5);
}

}  // namespace ember::exercises
