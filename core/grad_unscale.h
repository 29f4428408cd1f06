#pragma once
// The fused unscale of GradScaler (Note [Unscaling gradients in one pass] in
// core/kernel_bodies/grad_unscale.h).
#include <vector>

#include "core/kernels.h"
#include "core/tensor.h"

namespace ember {

// Multiplies every gradient in `grads` by inv_scale in place, and sets found_inf (a float32
// tensor of one element) to 1 if any of them held an inf or a NaN; leaves it as it was
// otherwise. The gradients are floating tensors of any dtype on found_inf's device, each given
// once. Runs under NoGradGuard (the gradients take no part in a graph).
void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale);

namespace kernels {
// All of grads contiguous and on found_inf's device; found_inf float32 with one element. Takes
// every floating dtype itself (SixteenBit::Native): it writes into the gradients in place.
using UnscaleGradsFn = void(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale);
inline Kernel<UnscaleGradsFn> unscale_grads{"non_finite_check_and_unscale_"};
}  // namespace kernels

}  // namespace ember
