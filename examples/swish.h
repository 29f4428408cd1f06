#pragma once
// Swish with a learnable beta, y = x * sigmoid(beta * x), written the two ways a user adds an op
// to ember without touching the library (docs/internals.md, "Write your own op"):
//
// - composed: an expression of existing ops. Autograd differentiates it for free; every op in
//   it is a node of the graph and saves what its own backward needs.
// - a custom Function: one node with a hand-written backward (Note [Writing an op] in
//   core/autograd/function.h). Here it saves x, beta and sigmoid(beta * x) and nothing else.
//
// beta has any shape that broadcasts to x's: one value, or one per channel ([C] for [N, C]
// inputs, [C, 1, 1] for [N, C, H, W]).
#include "core/autograd/function.h"
#include "core/check.h"
#include "core/ops.h"
#include "core/shape.h"

namespace ember::examples {

inline void check_swish_arguments(const Tensor& x, const Tensor& beta) {
  EMBER_CHECK(x.defined() && beta.defined(), "[swish] expects defined tensors");
  EMBER_CHECK(is_floating(x.dtype()) && x.dtype() == beta.dtype(), "[swish] expects x and beta of one floating "
              "point dtype, got ", x.dtype(), " and ", beta.dtype());
  EMBER_CHECK(broadcast_shapes(x.shape(), beta.shape(), "swish") == x.shape(), "[swish] beta of shape ",
              shape_str(beta.shape()), " must broadcast to the input's shape ", shape_str(x.shape()));
}

// The composed Swish: three nodes (mul, sigmoid, mul), each saving its own inputs or output.
inline Tensor swish_composed(const Tensor& x, const Tensor& beta) {
  check_swish_arguments(x, beta);
  return x * sigmoid(beta * x);
}

// The custom Function. With s = sigmoid(beta * x), y = x * s and s' = s * (1 - s):
//   dy/dx    = s + x * beta * s'
//   dy/dbeta = x * x * s'
// The gradient of beta is summed over the dims beta was broadcast along (sum_to), so backward
// returns it in beta's own shape.
struct Swish : autograd::Function<Swish> {
  static constexpr const char* name = "swish";
  struct State {
    autograd::SavedRef x, beta, sigmoid;  // sigmoid: s = sigmoid(beta * x)
  };
  static Tensor forward(autograd::Ctx& c, State& st, const Tensor& x, const Tensor& beta) {
    Tensor s = sigmoid(beta * x);  // forward runs under NoGradGuard: these ops record nothing
    st = {c.save(x), c.save(beta), c.save(s)};
    return x * s;
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& st, const Tensor& g) {
    Tensor x = c.get(st.x), beta = c.get(st.beta), s = c.get(st.sigmoid);
    Tensor g_times_x_ds = g * x * s * (1.0 - s);  // g * x * s', shared by both gradients
    Tensor gx = c.needs_input_grad(0) ? g * s + g_times_x_ds * beta : Tensor();
    Tensor gbeta = c.needs_input_grad(1) ? sum_to(g_times_x_ds * x, beta.shape()) : Tensor();
    return {gx, gbeta};
  }
};

inline Tensor swish(const Tensor& x, const Tensor& beta) {
  check_swish_arguments(x, beta);
  return Swish::apply(x, beta);
}

}  // namespace ember::examples
