// Exercise 3: the backward of softmax and of the fused cross-entropy. Read exercises/README.md
// (exercise 3) first.
#include "ex3_softmax_cross_entropy.h"

#include "not_implemented.h"

namespace ember::exercises {

// c.get(s.y) is y = softmax(x) along s.dim; g is dL/dy of y's shape.
autograd::Grads Softmax::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  (void)c;
  (void)s;
  (void)g;
  not_implemented(3);
}

// c.get(s.logits) is logits [N, C], c.get(s.target) target [N] (int64), c.get(s.lse) lse [N, 1];
// g is the 0-d dL/dloss. Return one gradient per tensor argument: {dL/dlogits, Tensor()}.
autograd::Grads SoftmaxCrossEntropy::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  (void)c;
  (void)s;
  (void)g;
  not_implemented(3);
}

}  // namespace ember::exercises
