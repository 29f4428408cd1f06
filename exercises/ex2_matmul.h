#pragma once
// Exercise 2: the backward of a matrix product, c = a @ b.
//
// a is [..., M, K] and b is [..., K, N] with batch dims that broadcast (b may be a plain [K, N]
// weight shared by the whole batch); c is [..., M, N]. The forward is given: it runs ember's
// matmul and saves both operands. You write Matmul::backward in exercises/ex2_matmul.cpp:
// given g = dL/dc of c's shape, return {dL/da, dL/db}.
#include <ember/ember.h>

namespace ember::exercises {

struct Matmul : autograd::Function<Matmul> {
  static constexpr const char* name = "exercise_matmul";
  struct State {
    autograd::SavedRef a, b;  // the operands; read them with c.get(s.a), c.get(s.b)
  };
  static Tensor forward(autograd::Ctx& c, State& s, const Tensor& a, const Tensor& b) {
    s = {c.save(a), c.save(b)};
    return ember::matmul(a, b);
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& g);  // yours
};

inline Tensor matmul(const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.defined() && b.defined() && a.dim() >= 2 && b.dim() >= 2,
              "[exercise_matmul] expects two tensors of at least 2 dims, got shapes ",
              a.defined() ? shape_str(a.shape()) : "undefined", " and ", b.defined() ? shape_str(b.shape()) : "undefined");
  return Matmul::apply(a, b);
}

}  // namespace ember::exercises
