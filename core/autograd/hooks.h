#pragma once
// Note [Tensor hooks]
// t.register_hook(fn) lets fn see, and replace, the gradient of t once backward has finished
// computing it: fn returns the new gradient, or an undefined Tensor to keep it. Where the hooks
// are kept follows where the engine sees that gradient complete:
//  - A non-leaf's gradient is input `output_nr` of its grad_fn, and it is complete (summed over
//    every use of t) when the engine pops that node. The hooks are kept on the node, one
//    TensorHooks per output, and the engine runs them then, before the node's backward. They
//    live as long as the graph: a hook on an intermediate runs even after its handle went out of
//    scope, as in PyTorch.
//  - A leaf's gradient ends at its AccumulateGrad sink, but the leaf holds that sink only weakly
//    (Note [The autograd graph]), so the hooks are kept on the leaf's TensorImpl and the sink
//    reports them to the engine, which runs them before the sink adds into .grad.
// Hooks run in registration order, each seeing the previous one's result, which must keep the
// gradient's shape, dtype and device. Under autograd::grad they run too, and the captured
// gradient is their result. A hook runs with grad mode off, like every backward formula.
//
// Note [retain_grad]
// Backward fills .grad of leaves only; t.retain_grad() asks it to fill a non-leaf's too. The
// non-leaf's TensorHooks then points back at t (weakly: t owns its grad_fn, which owns the
// hooks, so a strong pointer would be a cycle), and once its hooks have run the engine adds their
// result into t.grad exactly as AccumulateGrad does for a leaf: a copy on first arrival, a sum
// after, so it accumulates across backward calls until zeroed. On a leaf it does nothing.
//
// Note [Hooks and checkpointing]
// Inside a checkpointed function (utils/checkpoint.cpp) the forward builds the ordinary graph,
// and backward runs it: hooks and retain_grad act on it as they would without checkpointing.
// The recompute runs the function again only to regenerate saved tensors; the graph it builds is
// thrown away. register_hook and retain_grad therefore do nothing while recomputing
// (is_recomputing()): a hook the function registers on a parameter is registered once, in the
// forward, not once more per recompute.
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/autograd/hook_handle.h"
#include "core/tensor.h"

namespace ember::autograd {

struct Node;

using GradHook = std::function<Tensor(const Tensor&)>;

// The hooks of one tensor, and for a non-leaf with retain_grad() the tensor itself.
struct TensorHooks : HookList<GradHook> {
  std::weak_ptr<TensorImpl> retained;
};

// Runs the hooks of the tensors whose gradients are `grads` — the inputs of `node`, about to
// run — replacing each gradient by its hooks' result, and fills .grad of retained non-leaves.
void run_tensor_hooks(Node& node, std::vector<Tensor>& grads);

}  // namespace ember::autograd
