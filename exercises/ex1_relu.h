#pragma once
// Exercise 1: the backward of ReLU, y = max(x, 0).
//
// The forward is given: it runs ember's relu and saves the output y for the backward (y > 0
// exactly where x > 0, and y is kept alive by whatever consumes it anyway). You write
// Relu::backward in exercises/ex1_relu.cpp: given g = dL/dy, return dL/dx. At x == 0 the
// derivative is taken as 0, as PyTorch and ember's own relu do.
#include <ember/ember.h>

namespace ember::exercises {

struct Relu : autograd::Function<Relu> {
  static constexpr const char* name = "exercise_relu";
  struct State {
    autograd::SavedRef y;  // the output; read it with c.get(s.y)
  };
  static Tensor forward(autograd::Ctx& c, State& s, const Tensor& x) {
    Tensor y = ember::relu(x);
    s.y = c.save(y);
    return y;
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& g);  // yours
};

inline Tensor relu(const Tensor& x) {
  EMBER_CHECK(x.defined() && is_floating(x.dtype()), "[exercise_relu] expects a floating point tensor");
  return Relu::apply(x);
}

}  // namespace ember::exercises
