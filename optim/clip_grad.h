#pragma once
// Gradient clipping. PyTorch keeps it in torch.nn.utils; ember puts it next to the optimizers,
// the code that runs right after it in a training step.
#include <vector>

#include "core/tensor.h"

namespace ember::optim {

// Scales the gradients of `params` in place so that their total norm (all gradients as one
// vector, of order norm_type: a positive number or infinity) is at most max_norm, as
// torch.nn.utils.clip_grad_norm_: each gradient is multiplied by min(1, max_norm / (total + 1e-6)).
// Parameters without a gradient are skipped. Returns the total norm before clipping, a 0-d tensor
// on the first gradient's device (0 when there is no gradient), so no device sync is needed.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

// Clamps every element of the gradients of `params` in place to [-clip_value, clip_value], as
// torch.nn.utils.clip_grad_value_ (clip_value finite and >= 0). Parameters without a gradient
// are skipped. Unlike clip_grad_norm_ it changes the gradient's direction.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace ember::optim
