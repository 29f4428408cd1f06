#pragma once
// autograd::to_dot: the backward graph behind a tensor as Graphviz DOT text (Note [Graph
// pictures] in to_dot.cpp). `make docs-graphs` renders the pictures in docs/ with it.
#include <string>

#include "core/tensor.h"

namespace ember::autograd {

// The graph reachable from t's grad_fn (or t's own leaf sink): the tensor, one box per node
// with the tensors it saved (shape, dtype, bytes), one ellipse per leaf, an edge from each node
// to where its inputs' gradients go, and each checkpointed region as a dashed box.
std::string to_dot(const Tensor& t);

}  // namespace ember::autograd
