#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

// Runs backward from `outputs`, seeding them with `grad_outputs` (an undefined entry means
// ones, allowed for one-element outputs only), accumulating into the .grad of reachable leaves.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad. Every input must require grad and be
// reachable from the outputs.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

// True while a backward without retain_graph runs on this thread: every node it runs frees its
// saved tensors afterwards, so what a node unpacks now it will not unpack again. A checkpoint
// lets go of its policy's kept outputs then (Note [Letting kept outputs go] in utils/checkpoint.cpp).
bool backward_frees_graph();

// Whether a backward formula may write its result into the buffer of its incoming gradient `g`:
// this handle is the only one on g and on its storage, a whole contiguous buffer, and g is not
// part of a graph (create_graph). The engine drops g once the node has run, so no one can see the
// difference (Note [Taking over the incoming gradient] in core/autograd/engine.cpp).
bool gradient_is_reusable(const Tensor& g);
// Whether t is the only tensor on its memory (one tensor holds the storage: no view of it, no
// copy saved for backward, no output a checkpoint policy kept) and covers all of it, contiguous.
// Other handles on t itself may exist.
bool sole_tensor_on_its_memory(const Tensor& t);

// Note [End-of-backward callbacks]
// queue_callback(fn), called while a backward runs (from a hook or a backward formula), runs fn
// on this thread once that backward's last node has run, before backward() returns; callbacks
// run in the order queued, and one may queue another. It is how something started during
// backward is finished in time: DistributedDataParallel waits there for the gradient reductions
// it launched from the leaves' hooks, so .grad holds the averaged gradients when backward()
// returns. The callbacks belong to the innermost backward running on this thread (a backward
// started inside a hook has its own). Outside a backward it is an error.
void queue_callback(std::function<void()> fn);

}  // namespace ember::autograd
