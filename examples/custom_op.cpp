// A user-side op: Swish with a learnable per-channel beta (examples/swish.h), written once as a
// custom autograd Function and once composed from existing ops. The program checks that the two
// agree, then learns beta: the targets come from a known beta, and gradient descent on the
// custom op's gradient has to find it again.
#include <cstdio>

#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/ops.h"
#include "examples/swish.h"

using namespace ember;
using examples::swish;
using examples::swish_composed;

namespace {

// max |a - b| over the elements.
double max_difference(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

// Forward values and both gradients of the two versions, on one batch.
bool versions_agree(const Tensor& x, const Tensor& beta) {
  Tensor xs[2], betas[2], ys[2];
  for (int version = 0; version < 2; ++version) {
    xs[version] = x.detach().requires_grad_();
    betas[version] = beta.detach().requires_grad_();
    ys[version] = version == 0 ? swish(xs[version], betas[version]) : swish_composed(xs[version], betas[version]);
    sum(ys[version] * ys[version]).backward();
  }
  const double dy = max_difference(ys[0], ys[1]), dx = max_difference(xs[0].grad(), xs[1].grad()),
               dbeta = max_difference(betas[0].grad(), betas[1].grad());
  std::printf("custom vs composed: max |dy| %.2e, |dx.grad| %.2e, |dbeta.grad| %.2e\n", dy, dx, dbeta);
  return dy < 1e-5 && dx < 1e-4 && dbeta < 1e-3;
}

}  // namespace

int main() {
  manual_seed(0);
  const Tensor true_beta = tensor({0.5, 1.0, 1.5, 2.5});  // one per channel of a [N, 4] input
  Tensor x = randn({256, 4}) * 2.0;
  Tensor target = swish(x, true_beta);

  if (!versions_agree(x, true_beta)) {
    std::printf("the custom Function and the composed Swish disagree\n");
    return 1;
  }

  Tensor beta = ones({4}).requires_grad_();
  for (int step = 0; step <= 1000; ++step) {
    Tensor loss = mse_loss(swish(x, beta), target);
    loss.backward();
    {
      NoGradGuard no_grad;  // the update itself must not be recorded
      beta.add_(beta.grad(), -5.0);
      beta.grad().zero_();
    }
    if (step % 250 == 0) std::printf("step %4d  loss %.2e\n", step, loss.item());
  }
  const std::vector<double> learned = beta.to_vector<double>();
  std::printf("learned beta = %.3f %.3f %.3f %.3f (true 0.5 1 1.5 2.5)\n", learned[0], learned[1], learned[2], learned[3]);
  return max_difference(beta, true_beta) < 0.05 ? 0 : 1;
}
