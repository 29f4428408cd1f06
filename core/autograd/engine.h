#pragma once
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

}  // namespace ember::autograd
