// The fused unscale of GradScaler: the checks, the staging of gradients the kernel cannot take,
// the kernel call and the version bumps (Note [Unscaling gradients in one pass] in
// core/kernel_bodies/grad_unscale.h).
#include "core/grad_unscale.h"

#include <cmath>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/memory_overlap.h"

namespace ember {

namespace {
constexpr const char* kOp = "non_finite_check_and_unscale_";

std::string describe(const Tensor& t) {
  return dtype_name(t.dtype()) + (" " + shape_str(t.shape())) + " on " + t.device().str();
}
}  // namespace

void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  EMBER_CHECK(found_inf.defined() && found_inf.dtype() == kFloat32 && found_inf.numel() == 1, "[", kOp,
              "] found_inf must be a float32 tensor of one element, got ",
              found_inf.defined() ? describe(found_inf) : "an undefined tensor");
  EMBER_CHECK(std::isfinite(inv_scale), "[", kOp, "] inv_scale must be finite, got ", inv_scale);
  std::vector<Tensor> dense;  // what the kernel sees: the gradients, or contiguous copies of them
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    EMBER_CHECK(g.defined(), "[", kOp, "] gradient ", i, " is undefined");
    EMBER_CHECK(is_floating(g.dtype()) && g.device() == found_inf.device(), "[", kOp, "] gradient ", i, " is ",
                describe(g), "; expected floating gradients on found_inf's device, ", found_inf.device().str());
    EMBER_CHECK(!is_grad_enabled() || !g.requires_grad(), "[", kOp, "] writes gradient ", i, " (", describe(g),
                ") in place, which takes part in autograd; run it under NoGradGuard");
    check_no_internal_overlap(g, kOp);
    // Given twice, a gradient would be divided twice.
    for (size_t j = 0; j < i; ++j)
      EMBER_CHECK(overlap(grads[j], g) == Overlap::No, "[", kOp, "] gradients ", j, " and ", i,
                  " share memory; each gradient must be given once");
    dense.push_back(g.is_contiguous() ? g : g.contiguous());
  }
  if (dense.empty()) return;
  kernels::unscale_grads[found_inf.device()](dense, found_inf, inv_scale);
  found_inf.storage()->bump_version();
  for (size_t i = 0; i < grads.size(); ++i) {
    if (dense[i].impl() != grads[i].impl()) grads[i].copy_(dense[i]);
    else grads[i].storage()->bump_version();
  }
}

}  // namespace ember
