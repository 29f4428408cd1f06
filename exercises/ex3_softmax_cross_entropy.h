#pragma once
// Exercise 3: the backward of softmax, and of the fused softmax + cross-entropy loss.
//
// (a) Softmax along `dim`: y = exp(x) / sum(exp(x)). The forward is given and saves y. You
//     write Softmax::backward: given g = dL/dy, return dL/dx.
// (b) Cross-entropy with mean reduction, fused with the softmax: for logits [N, C] and int64
//     class indices target [N],
//         loss = 1/N sum_r (lse_r - logits[r, target_r]),  lse_r = log sum_j exp(logits[r, j]).
//     The forward is given: it computes lse stably (subtracting each row's max) and saves the
//     logits, the target and lse [N, 1]; no [N, C] probabilities are kept. You write
//     SoftmaxCrossEntropy::backward: given the 0-d g = dL/dloss, return {dL/dlogits, no gradient
//     for the target}.
// Both go in exercises/ex3_softmax_cross_entropy.cpp.
#include <ember/ember.h>

namespace ember::exercises {

struct Softmax : autograd::Function<Softmax> {
  static constexpr const char* name = "exercise_softmax";
  struct State {
    int64_t dim;  // in [0, x.dim())
    autograd::SavedRef y;  // the output; read it with c.get(s.y)
  };
  static Tensor forward(autograd::Ctx& c, State& s, const Tensor& x, int64_t dim) {
    s.dim = dim < 0 ? dim + x.dim() : dim;
    Tensor y = ember::softmax(x, s.dim);
    s.y = c.save(y);
    return y;
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& g);  // yours
};

inline Tensor softmax(const Tensor& x, int64_t dim) {
  EMBER_CHECK(x.defined() && is_floating(x.dtype()) && x.dim() >= 1, "[exercise_softmax] expects a floating point "
              "tensor of at least 1 dim");
  EMBER_CHECK(dim >= -x.dim() && dim < x.dim(), "[exercise_softmax] dim ", dim, " is out of range for shape ",
              shape_str(x.shape()));
  return Softmax::apply(x, dim);
}

struct SoftmaxCrossEntropy : autograd::Function<SoftmaxCrossEntropy> {
  static constexpr const char* name = "exercise_cross_entropy";
  struct State {
    autograd::SavedRef logits, target, lse;  // read them with c.get(s.logits), ...
  };
  static Tensor forward(autograd::Ctx& c, State& s, const Tensor& logits, const Tensor& target) {
    const Tensor row_max = max(logits, {1}, /*keepdim=*/true);
    const Tensor lse = log(sum(exp(logits - row_max), {1}, /*keepdim=*/true)) + row_max;  // [N, 1]
    const Tensor picked = gather(logits, 1, target.unsqueeze(1));                         // logits[r, target_r]
    s = {c.save(logits), c.save(target), c.save(lse)};
    return mean(lse - picked);
  }
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& g);  // yours
};

inline Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  EMBER_CHECK(logits.defined() && target.defined() && logits.dim() == 2 && target.dim() == 1 &&
                  target.size(0) == logits.size(0) && logits.size(0) > 0,
              "[exercise_cross_entropy] expects logits [N, C] and a target [N] with N > 0, got shapes ",
              logits.defined() ? shape_str(logits.shape()) : "undefined", " and ",
              target.defined() ? shape_str(target.shape()) : "undefined");
  EMBER_CHECK(is_floating(logits.dtype()) && target.dtype() == kInt64,
              "[exercise_cross_entropy] expects floating point logits and an int64 target, got ", logits.dtype(),
              " and ", target.dtype());
  return SoftmaxCrossEntropy::apply(logits, target);
}

}  // namespace ember::exercises
