// Exercise 5, the reference solution.
#include "ex5_checkpoint.h"

namespace ember::exercises {

// Function::apply runs forward under NoGradGuard, so fn's ops build no nodes and save nothing:
// their intermediate results die as soon as fn no longer holds them. Only the inputs are saved
// (through Ctx::save, so an in-place change before backward is caught by the version check), and
// the generators' states, 16 bytes each, so that backward can draw Dropout's masks again.
Tensor CheckpointSegment::forward(autograd::Ctx& c, State& s, const Segment& fn, const std::vector<Tensor>& inputs) {
  s.fn = fn;
  s.rng = get_rng_states();
  for (const Tensor& x : inputs) s.inputs.push_back(c.save(x));
  return fn(inputs);
}

// The recompute runs fn on detached copies of the inputs (fresh leaves, so its graph ends here
// and does not reach back into the outer graph), with grad mode on and the generators put back
// where the forward found them; RngStateGuard then restores them to where they are now, so the
// replay does not move anyone's random stream. autograd::grad backpropagates g through the new
// graph and returns the gradients of the leaves that need one; the graph dies with `y`.
autograd::Grads CheckpointSegment::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  std::vector<Tensor> leaves, wanted;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    Tensor leaf = c.get(s.inputs[i]).detach();
    if (c.needs_input_grad(i)) {
      leaf.requires_grad_();
      wanted.push_back(leaf);
    }
    leaves.push_back(leaf);
  }
  Tensor y;
  {
    RngStateGuard restore_afterwards;
    set_rng_states(s.rng);
    EnableGradGuard record;
    y = s.fn(leaves);
  }
  const std::vector<Tensor> wanted_grads = autograd::grad({y}, wanted, {g});
  autograd::Grads grads(s.inputs.size());
  for (size_t i = 0, next = 0; i < s.inputs.size(); ++i)
    if (c.needs_input_grad(i)) grads[i] = wanted_grads[next++];
  return grads;
}

}  // namespace ember::exercises
