#include "core/autograd/hooks.h"

#include "core/autograd/node.h"
#include "core/autograd/recompute.h"
#include "core/check.h"

namespace ember::autograd {

namespace {

// Where t's hooks are kept (Note [Tensor hooks]), created on first use.
std::shared_ptr<TensorHooks>& hooks_of(const Tensor& t) {
  TensorImpl* impl = t.impl();
  std::shared_ptr<TensorHooks>* slot = &impl->hooks;
  if (impl->grad_fn) {
    auto& per_output = impl->grad_fn->output_hooks;
    const auto output = static_cast<size_t>(impl->output_nr);
    if (per_output.size() <= output) per_output.resize(output + 1);
    slot = &per_output[output];
  }
  if (!*slot) *slot = std::make_shared<TensorHooks>();
  return *slot;
}

void check_requires_grad(const Tensor& t, const char* api) {
  EMBER_CHECK(t.defined(), "[", api, "] called on an undefined tensor");
  EMBER_CHECK(t.requires_grad(), "[", api, "] cannot be called on a tensor of shape ", shape_str(t.shape()),
              " that does not require grad (call requires_grad_() on a leaf first)");
}

Tensor run_hooks(const TensorHooks& h, Tensor grad, const char* node) {
  // A copy: a hook may remove itself or register another while the list runs.
  const std::vector<std::pair<uint64_t, GradHook>> hooks = h.hooks;
  for (const auto& [id, hook] : hooks) {
    Tensor result = hook(grad);
    if (!result.defined()) continue;
    EMBER_CHECK(result.shape() == grad.shape() && result.dtype() == grad.dtype() && result.device() == grad.device(),
                "[register_hook] a hook returned a gradient of shape ", shape_str(result.shape()), " ", result.dtype(),
                " on ", result.device(), " for a gradient of shape ", shape_str(grad.shape()), " ", grad.dtype(), " on ",
                grad.device(), " (on its way into ", node, "); a hook must keep the shape, dtype and device");
    grad = std::move(result);
  }
  return grad;
}

}  // namespace

void run_tensor_hooks(Node& node, std::vector<Tensor>& grads) {
  for (size_t slot = 0; slot < grads.size(); ++slot) {
    const TensorHooks* h = node.tensor_hooks(slot);
    if (!h || !grads[slot].defined()) continue;
    grads[slot] = run_hooks(*h, std::move(grads[slot]), node.name());
    if (std::shared_ptr<TensorImpl> retained = h->retained.lock()) accumulate_grad(*retained, Tensor(grads[slot]));  // flows on: a copy
  }
}

}  // namespace ember::autograd

namespace ember {

autograd::HookHandle Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  autograd::check_requires_grad(*this, "register_hook");
  EMBER_CHECK(hook, "[register_hook] the hook is empty");
  if (autograd::is_recomputing()) return {};  // Note [Hooks and checkpointing]
  std::shared_ptr<autograd::TensorHooks>& hooks = autograd::hooks_of(*this);
  const uint64_t id = hooks->add(std::move(hook));
  return {hooks, id};
}

void Tensor::retain_grad() const {
  autograd::check_requires_grad(*this, "retain_grad");
  if (is_leaf() || autograd::is_recomputing()) return;  // Note [Hooks and checkpointing]
  autograd::hooks_of(*this)->retained = impl_ptr();
}

bool Tensor::retains_grad() const {
  if (!defined() || is_leaf()) return false;
  const autograd::TensorHooks* h = grad_fn()->tensor_hooks(static_cast<size_t>(output_nr()));
  return h && !h->retained.expired();
}

}  // namespace ember
