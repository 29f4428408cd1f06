// Exercise 2, the reference solution.
#include "ex2_matmul.h"

namespace ember::exercises {

// c[m, n] = sum_k a[m, k] b[k, n], so dL/da[m, k] = sum_n g[m, n] b[k, n] = (g @ b^T)[m, k] and
// dL/db[k, n] = sum_m a[m, k] g[m, n] = (a^T @ g)[k, n]. The transposes are views (no copy;
// ember's matmul hands them to BLAS as transpose flags). With a batched a and a shared [K, N] b,
// a^T @ g is [B, K, N]: returned as it is, the node sums it over the batch to b's shape (Note
// [Gradient shapes] in core/autograd/function.h). needs_input_grad skips a product nobody wants.
autograd::Grads Matmul::backward(autograd::Ctx& c, const State& s, const Tensor& g) {
  const Tensor a = c.get(s.a), b = c.get(s.b);
  Tensor grad_a = c.needs_input_grad(0) ? ember::matmul(g, b.transpose(-1, -2)) : Tensor();
  Tensor grad_b = c.needs_input_grad(1) ? ember::matmul(a.transpose(-1, -2), g) : Tensor();
  return {grad_a, grad_b};
}

}  // namespace ember::exercises
