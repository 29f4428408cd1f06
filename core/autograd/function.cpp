// The non-template parts of Function<Op>: attaching outputs to their node, and fitting the
// gradients a backward returns to the inputs' shapes.
#include "core/autograd/function.h"

#include "core/check.h"
#include "core/ops.h"

namespace ember::autograd::detail {

void set_history(Tensor& out, std::shared_ptr<Node> node, int output_nr) {
  TensorImpl* impl = out.impl();
  impl->requires_grad = true;
  impl->grad_fn = std::move(node);
  impl->output_nr = output_nr;
}

Tensor alias(const Tensor& t) { return make_view(t, t.shape(), t.strides(), t.offset()); }

void set_history(std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node) {
  // One impl with two histories would silently lose one of them.
  for (size_t i = 0; i < outputs.size(); ++i) {
    EMBER_CHECK(outputs[i].defined(), "[", node->name(), "] forward output ", i, " is an undefined tensor");
    for (size_t j = 0; j < i; ++j)
      EMBER_CHECK(!outputs[i].is_same(outputs[j]), "[", node->name(), "] forward outputs ", j, " and ", i,
                  " are the same tensor; return a view or a clone for each output");
  }
  for (size_t i = 0; i < outputs.size(); ++i) set_history(outputs[i], node, static_cast<int>(i));
}

namespace {

// Whether `from` broadcasts to `to` (NumPy rules: align at the right; each dim of `from` is 1 or
// equal), i.e. whether sum_to can bring a tensor of shape `to` back to `from`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  return true;
}

}  // namespace

Grads fit_gradients(const char* op, Grads grads, const std::vector<InputMeta>& inputs,
                    const std::vector<bool>& needs_grad) {
  EMBER_CHECK(grads.size() <= inputs.size(), "[", op, "] backward returned ", grads.size(),
              " gradient(s) for ", inputs.size(), " tensor input(s)");
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor& g = grads[i];
    if (!g.defined()) continue;
    if (!needs_grad[i]) {
      g = Tensor();
      continue;
    }
    const InputMeta& input = inputs[i];
    EMBER_CHECK(is_floating(g.dtype()), "[", op, "] backward returned a gradient of dtype ", g.dtype(), " for input ", i,
                "; gradients are floating point");
    EMBER_CHECK(g.device() == input.device, "[", op, "] backward returned a gradient on ", g.device(),
                " for input ", i, " on ", input.device);
    if (g.dtype() != input.dtype) g = g.to(input.dtype);
    if (g.shape() == input.shape) continue;
    EMBER_CHECK(broadcasts_to(input.shape, g.shape()), "[", op, "] backward returned a gradient of shape ",
                shape_str(g.shape()), " for input ", i, " of shape ", shape_str(input.shape),
                ", which does not broadcast to it");
    g = sum_to(g, input.shape);
  }
  return grads;
}

}  // namespace ember::autograd::detail
