// Exercise 2: matmul's backward. Read exercises/README.md (exercise 2) first.
#include "ex2_matmul.h"

#include "not_implemented.h"

namespace ember::exercises {

// c.get(s.a) is a [..., M, K], c.get(s.b) is b [..., K, N], g is dL/dc [..., M, N].
autograd::Grads Matmul::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  (void)c;
  (void)s;
  (void)g;
  not_implemented(2);
}

}  // namespace ember::exercises
