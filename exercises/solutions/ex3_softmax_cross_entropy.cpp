// Exercise 3, the reference solution.
#include "ex3_softmax_cross_entropy.h"

namespace ember::exercises {

// dy_i/dx_j = y_i ([i == j] - y_j), so dL/dx_j = sum_i g_i y_i ([i == j] - y_j)
//                                               = y_j (g_j - sum_i g_i y_i):
// one dot product per row instead of the [C, C] Jacobian.
autograd::Grads Softmax::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  const Tensor y = c.get(s.y);
  return {y * (g - sum(g * y, {s.dim}, /*keepdim=*/true))};
}

// d loss_r / d logits[r, j] = softmax[r, j] - [j == target_r], and the mean divides by N. The
// softmax is recomputed from what was saved, exp(logits - lse), rather than kept from the
// forward; the one-hot rows come from comparing each class index with the row's target.
autograd::Grads SoftmaxCrossEntropy::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  const Tensor logits = c.get(s.logits), target = c.get(s.target), lse = c.get(s.lse);
  const int64_t n = logits.size(0), classes = logits.size(1);
  const Tensor probabilities = exp(logits - lse);
  const Tensor one_hot = arange(static_cast<double>(classes), TensorOptions(kInt64).with_device(logits.device())) ==
                         target.unsqueeze(1);  // uint8 [N, C]
  return {(probabilities - one_hot) * (g / static_cast<double>(n)), Tensor()};
}

}  // namespace ember::exercises
