// Fits y = 3x - 2 with a one-neuron linear model, the way a PyTorch user would write it:
// tensors that require grad, a forward expression, loss.backward(), and an update under no_grad.
#include <cstdio>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/ops.h"

using namespace ember;

int main() {
  manual_seed(0);
  Tensor x = randn({64, 1});
  Tensor y = x * 3.0 - 2.0 + randn({64, 1}) * 0.1;

  Tensor w = zeros({1, 1}).requires_grad_(), b = zeros({1}).requires_grad_();
  for (int step = 0; step <= 100; ++step) {
    Tensor loss = mse_loss(matmul(x, w) + b, y);
    loss.backward();
    {
      NoGradGuard no_grad;  // the update itself must not be recorded
      w.add_(w.grad(), -0.1);
      b.add_(b.grad(), -0.1);
      w.grad().zero_();
      b.grad().zero_();
    }
    if (step % 25 == 0) std::printf("step %3d  loss %.5f\n", step, loss.item());
  }
  std::printf("learned w = %.3f, b = %.3f (true 3, -2)\n", w.item(), b.item());
  std::printf("%s\n", memory::summary(kCPU).c_str());
  return 0;
}
