#pragma once
#include "nn/module.h"

namespace ember::nn {

struct CrossEntropyLossOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};

// Logits [N, C] and int64 class indices [N]; see ember::cross_entropy.
class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(CrossEntropyLossOptions options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return cross_entropy(input, target, options.reduction, options.ignore_index, options.label_smoothing);
  }
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  const CrossEntropyLossOptions options;
};

class MSELoss : public Module {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  const Reduction reduction;
};

}  // namespace ember::nn
