#pragma once
// The loss modules: each holds its settings and calls the loss op of the same name (core/ops.h,
// nn::functional). Class weights are registered as buffers, as in PyTorch, so Module::to moves
// them with the model and state_dict saves them. print() shows the settings in PyTorch's
// argument names (PyTorch's own losses print none; Note [Printing settings] in nn/repr.h).
#include <string>

#include "nn/module.h"

namespace ember::nn {

// Mean/sum/none as PyTorch spells it: 'mean'.
std::string reduction_repr(Reduction reduction);

// A loss module: forward(input, target) and the call operator.
class Loss : public Module {
 public:
  using Module::forward;
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
};

struct CrossEntropyLossOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Tensor weight = Tensor();  // [C], or undefined for equal weights
};

// Logits [N, C] (or [C], [N, C, d1, ...]) and int64 class indices or class probabilities; see
// ember::cross_entropy.
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyLossOptions options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return cross_entropy(input, target, options.reduction, options.ignore_index, options.label_smoothing, weight);
  }
  const CrossEntropyLossOptions options;
  Tensor weight;  // a buffer when defined (it moves with to(device))

 protected:
  std::string extra_repr() const override;
};

struct NLLLossOptions {
  Tensor weight;  // [C], or undefined for equal weights
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

// Log-probabilities [N, C] or [N, C, d1, ...] and int64 class indices; see ember::nll_loss.
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(NLLLossOptions options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return nll_loss(input, target, reduction, ignore_index, weight);
  }
  Tensor weight;  // a buffer when defined
  const int64_t ignore_index;
  const Reduction reduction;

 protected:
  std::string extra_repr() const override;
};

// Probabilities in [0, 1]; see ember::binary_cross_entropy.
class BCELoss : public Loss {
 public:
  explicit BCELoss(Tensor weight = Tensor(), Reduction reduction = Reduction::Mean);
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return binary_cross_entropy(input, target, reduction, weight);
  }
  Tensor weight;  // a buffer when defined
  const Reduction reduction;

 protected:
  std::string extra_repr() const override;
};

struct BCEWithLogitsLossOptions {
  Tensor weight;      // broadcast to the input, or undefined
  Tensor pos_weight;  // the positive term's weight, e.g. [C]; or undefined
  Reduction reduction = Reduction::Mean;
};

// Logits; see ember::binary_cross_entropy_with_logits.
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(BCEWithLogitsLossOptions options = {});
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return binary_cross_entropy_with_logits(input, target, reduction, weight, pos_weight);
  }
  Tensor weight, pos_weight;  // buffers when defined
  const Reduction reduction;

 protected:
  std::string extra_repr() const override;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override { return mse_loss(input, target, reduction); }
  const Reduction reduction;

 protected:
  std::string extra_repr() const override;
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override { return l1_loss(input, target, reduction); }
  const Reduction reduction;

 protected:
  std::string extra_repr() const override;
};

// See ember::smooth_l1_loss; beta >= 0 (checked when built).
class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(Reduction reduction = Reduction::Mean, double beta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return smooth_l1_loss(input, target, reduction, beta);
  }
  const Reduction reduction;
  const double beta;

 protected:
  std::string extra_repr() const override;
};

// See ember::huber_loss; delta > 0 (checked when built).
class HuberLoss : public Loss {
 public:
  explicit HuberLoss(Reduction reduction = Reduction::Mean, double delta = 1.0);
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return huber_loss(input, target, reduction, delta);
  }
  const Reduction reduction;
  const double delta;

 protected:
  std::string extra_repr() const override;
};

}  // namespace ember::nn
