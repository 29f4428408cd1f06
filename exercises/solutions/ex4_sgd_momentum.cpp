// Exercise 4, the reference solution.
#include "ex4_sgd_momentum.h"

namespace ember::exercises {

// The update writes into the parameters in place, which autograd refuses for tensors that require
// grad while grad mode is on (Note [In-place ops and autograd]); an optimizer step is not part of
// any graph, so it runs under NoGradGuard. The buffer starts as a clone of the first gradient
// (not zeros and not an alias: the gradient is zeroed or replaced before the next step).
void MomentumSGD::step() {
  NoGradGuard no_grad;
  const optim::SGDOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = o.maximize_ ? -p.grad() : p.grad();
    if (o.weight_decay_ != 0.0) g = g + p * o.weight_decay_;
    if (o.momentum_ != 0.0) {
      Tensor& buffer = momentum_buffers_[i];
      if (!buffer.defined()) {
        buffer = g.clone();
      } else {
        buffer.mul_(o.momentum_);
        buffer.add_(g, 1.0 - o.dampening_);
      }
      g = o.nesterov_ ? g + buffer * o.momentum_ : buffer;
    }
    p.add_(g, -o.lr_);
  }
}

}  // namespace ember::exercises
