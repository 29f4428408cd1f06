#pragma once
// Note [Multi-tensor optimizer updates]
// Written op by op, an optimizer step is a handful of tensor ops per parameter (SGD with momentum:
// mul_, add_, a product for the weight decay, add_ into the parameter; Adam about ten), each a
// pass over memory and, on a GPU, a launch: ~400 small ops for a ResNet-20 step. The fused step
// does the whole update rule of every parameter of a group in one pass over each element:
//   - optim/ gathers, per parameter group, the parameters whose grad is defined into batches of
//     one device and dtype, creates their state and counts their steps as before, and calls
//     fused_optimizer_step once per batch with the group's rule (its hyper-parameters);
//   - the kernel (kernels::optimizer_step, declared below) sees a table of (param, grad, state...)
//     pointers. The CPU runs one OpenMP loop over equal chunks of all the batch's elements, a
//     chunk running across parameter boundaries (core/cpu/optimizer_step.cpp); CUDA uploads the
//     table once and runs one launch, a block per piece of a parameter (cuda/optimizer_step.cu);
//   - the rule is a per-element function written once for both devices
//     (core/kernel_bodies/optimizer_updates.h), one instantiation per combination of the options
//     that change its formula (momentum, nesterov, weight decay, amsgrad, ...), picked once per
//     call, so the CPU's inner loop has no branch and vectorises.
// The composed update (each optimizer's reference function in optim/) stays: it is the readable
// statement of the rule, the tests' oracle, and the path of every parameter the kernel does not
// take (non-contiguous, a grad or state of another dtype, device or shape: fused_step_accepts).
// Every optimizer's option `fused` (default on; torch.optim's `fused` and `foreach` are the same
// idea) chooses between the two. On the CPU both give bitwise the same parameters and state, and
// the CUDA kernel gives the CPU kernel's bits (Note [Replaying the composed update's rounding]
// says how), so the option changes speed, not results; it is not a hyper-parameter and not part
// of the state_dict.
#include <array>
#include <cmath>
#include <cstdint>
#include <variant>
#include <vector>

#include "core/kernel_table.h"
#include "core/tensor.h"

namespace ember {

// The hyper-parameters of one group's update, as the optimizers of the same names (optim/)
// define them; their Notes give the formulas.
struct SgdRule {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};
struct AdamRule {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad;
  bool decoupled_weight_decay;  // AdamW's: the parameter shrinks beside the moments
};
struct RMSpropRule {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered;
};
struct AdagradRule {
  double lr, lr_decay, weight_decay, eps;
};
using OptimizerRule = std::variant<SgdRule, AdamRule, RMSpropRule, AdagradRule>;

// One parameter of a fused step.
struct FusedParam {
  Tensor param, grad;
  // The state tensors the rule uses, in its order, the others undefined: SGD {momentum_buffer}
  // (with momentum); Adam {exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad)}; RMSprop {square_avg,
  // grad_avg (centered), momentum_buffer (momentum)}, the used ones first; Adagrad {sum}.
  std::array<Tensor, 3> state;
  int64_t step = 0;          // the parameter's step count, this step included (Adam, Adagrad)
  bool state_is_new = false;  // SGD: the momentum buffer was made for this step and starts as the gradient
};

// Updates every parameter of `params` and its state in place by `rule`, in one pass over their
// elements. All tensors contiguous, of one floating dtype and device; each grad and state tensor
// of its parameter's shape. Runs under NoGradGuard, as every optimizer step.
void fused_optimizer_step(const OptimizerRule& rule, const std::vector<FusedParam>& params);

namespace kernels {
// The kernel slot of fused_optimizer_step, declared here rather than in core/kernels/ so that
// only the optimizer code sees the rules. The contract of fused_optimizer_step holds: all
// contiguous, one floating dtype and device, grads and state shaped like their parameters.
using OptimizerStepFn = void(const OptimizerRule& rule, const std::vector<FusedParam>& params);
inline Kernel<OptimizerStepFn> optimizer_step{"optimizer_step", Writes{}};  // takes no 16-bit floats: fused_step_accepts
}  // namespace kernels

// Whether `like` (a grad or a state tensor) lets `param` take fused_optimizer_step: both
// contiguous, of param's shape, floating dtype and device, on a device with the kernel.
bool fused_step_accepts(const Tensor& param, const Tensor& like);

// What changes from step to step, shared by the composed updates and the kernels so that both
// compute the same doubles:
// Adam's bias correction of a moment with decay beta at step t (1 on the first step).
inline double adam_bias_correction(double beta, int64_t t) { return 1.0 - std::pow(beta, static_cast<double>(t)); }
// Adagrad's learning rate at step t.
inline double adagrad_lr(double lr, double lr_decay, int64_t t) {
  return lr / (1.0 + (static_cast<double>(t) - 1.0) * lr_decay);
}

}  // namespace ember
