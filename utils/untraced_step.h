#pragma once
// A guard for a training step that is run only to be measured (the planner's profiles): while it
// lives the step may run forward and backward as training does, and when it ends everything the
// step could have changed is as it was: the generators' states (Dropout masks), BatchNorm's running
// statistics, the grad mode and the .grad of the tensors it was given. The step starts from
// gradients set to none, as after zero_grad(), so the bytes it measures are those of a real step.
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/recompute.h"
#include "core/generator.h"
#include "core/tensor.h"

namespace ember::utils {

// Takes the .grad of every tensor away for the guard's lifetime, and gives it back.
class GradsSetAside {
 public:
  explicit GradsSetAside(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
    for (const Tensor& t : tensors_) {
      grads_.push_back(t.grad());
      t.set_grad(Tensor());
    }
  }
  ~GradsSetAside() {
    for (size_t i = 0; i < tensors_.size(); ++i) tensors_[i].set_grad(grads_[i]);
  }
  GradsSetAside(const GradsSetAside&) = delete;
  GradsSetAside& operator=(const GradsSetAside&) = delete;

 private:
  std::vector<Tensor> tensors_, grads_;
};

class UntracedStep {
 public:
  // `leaves`: the parameters and inputs whose .grad the step would otherwise set.
  explicit UntracedStep(std::vector<Tensor> leaves) : grads_(std::move(leaves)) {}
  UntracedStep(const UntracedStep&) = delete;
  UntracedStep& operator=(const UntracedStep&) = delete;

 private:
  RngStateGuard generators_;
  autograd::RecomputeGuard no_side_effects_;  // BatchNorm leaves its running statistics alone
  EnableGradGuard grad_on_;
  GradsSetAside grads_;
};

}  // namespace ember::utils
