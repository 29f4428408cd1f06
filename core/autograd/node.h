#pragma once
// Note [The autograd graph]
// Every differentiable op that sees an input requiring grad creates a Node and records, for each
// tensor input, an Edge to where that input's gradient must go: the node that produced the
// input (its grad_fn, at the input's output_nr) or, for a leaf, the leaf's AccumulateGrad sink.
// The graph therefore points from outputs back to inputs; the output tensor owns its grad_fn, so
// the graph lives exactly as long as somebody holds a tensor that can reach it.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd/graph_region.h"
#include "core/tensor.h"

namespace ember::autograd {

struct Node;
struct TensorHooks;
class SavedTensor;

struct Edge {
  std::shared_ptr<Node> node;
  int input_nr = 0;
  bool valid() const { return node != nullptr; }
};

struct Node {
  Node() : Node(false) {}
  virtual ~Node();  // iterative: Note [Destroying long graphs]
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients w.r.t. this node's forward outputs in, gradients w.r.t. its inputs out
  // (one per edge in `next`, undefined where there is none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual const char* name() const = 0;
  // What the node keeps for its backward (autograd::to_dot draws it); none by default.
  virtual const std::vector<SavedTensor>* saved_tensors() const { return nullptr; }
  virtual int num_outputs() const { return 1; }
  // Frees saved tensors once the node ran in a backward without retain_graph.
  virtual void release_saved() {}
  // The hooks of the tensor whose gradient arrives at input `slot` (Note [Tensor hooks]): that
  // of the non-leaf this node produced at output `slot`, or none.
  virtual TensorHooks* tensor_hooks(size_t slot) const {
    return slot < output_hooks.size() ? output_hooks[slot].get() : nullptr;
  }

  std::vector<Edge> next;
  // Per output, the hooks registered on the tensor this node produced there (null: none yet).
  std::vector<std::shared_ptr<TensorHooks>> output_hooks;
  // Later nodes run first among those ready, so backward follows the reverse of the forward.
  const uint64_t sequence_nr;
  // The region the node was recorded in (Note [Graph regions]).
  const GraphRegion region;
  // Whether this is a leaf's AccumulateGrad: the engine runs those first, and asks on every
  // comparison of its queue, so it is a field rather than a dynamic_cast.
  const bool accumulates_into_leaf;

 protected:
  explicit Node(bool accumulates_into_leaf);
};

// The sink of a leaf tensor: adds the incoming gradient into leaf.grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node(true), leaf(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const char* name() const override { return "AccumulateGrad"; }
  TensorHooks* tensor_hooks(size_t) const override { return leaf->hooks.get(); }  // kept on the leaf
  std::shared_ptr<TensorImpl> leaf;
};

// Adds g into t.grad (Note [Taking over the incoming gradient]): on first arrival g itself when
// nothing else can see it, else a copy (g may alias another tensor's gradient or an op's buffer,
// and zero_grad() later writes into .grad in place); after that a sum, in place when nothing else
// can see .grad.
void accumulate_grad(TensorImpl& t, Tensor&& g);

// Where a gradient for `t` must be sent: its grad_fn, or its (shared) AccumulateGrad for a leaf
// that requires grad, or nowhere.
Edge gradient_edge(const Tensor& t);

}  // namespace ember::autograd
