#include "optim/clip_grad.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"

namespace ember::optim {

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  EMBER_CHECK(norm_type > 0.0, "[clip_grad_norm_] norm_type must be positive or infinity, got ", norm_type);
  EMBER_CHECK(max_norm >= 0.0, "[clip_grad_norm_] max_norm must be >= 0, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> norms;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) norms.push_back(vector_norm(p.grad(), norm_type));
  if (norms.empty()) return scalar_tensor(0.0);
  const Device device = norms[0].device();
  for (Tensor& n : norms) n = n.to(device);
  // The norm of the per-gradient norms is the norm of all gradients together; each is computed in
  // float32 for a 16-bit gradient (whose squares would overflow float16) and returned in its dtype,
  // and stack promotes mixed dtypes, as PyTorch's clip_grad_norm_ does.
  const Tensor total = vector_norm(stack(norms), norm_type);
  // min(1, ...) on the device rather than an `if` on the host: no sync to read the norm back.
  const Tensor scale = clamp(max_norm / (total + 1e-6), 0.0, 1.0);
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) p.grad().mul_(scale);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  EMBER_CHECK(std::isfinite(clip_value) && clip_value >= 0.0,
              "[clip_grad_value_] clip_value must be finite and >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) p.grad().copy_(clamp(p.grad(), -clip_value, clip_value));
}

}  // namespace ember::optim
