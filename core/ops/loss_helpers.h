#pragma once
// What the loss files (core/ops/loss.cpp, regression_loss.cpp, binary_cross_entropy.cpp) share:
// the reduction and the checks of input against target.
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember::ops {

// A loss's reduction, as the caller passed it (Note [Enums from callers] in core/device.h).
inline void check_reduction(Reduction reduction, const char* op) {
  check_enum(reduction, Reduction::Sum, op, "reduction");
}

// None: the per-element losses; Sum; Mean: the sum divided by `count` (the number of elements,
// or of the targets that are not ignored). A 16-bit mean divides the float32 sum and rounds once,
// as PyTorch's mean does: the float16 sum of 1000 squared errors of 10 is inf, their mean 100.
inline Tensor reduce_loss(const Tensor& losses, Reduction reduction, double count) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean:
      if (is_sixteen_bit(losses.dtype())) return (sum(losses.to(kFloat32)) / count).to(losses.dtype());
      return sum(losses) / count;
  }
  return losses;
}

// The elementwise losses take a floating input and a target of the same shape, dtype and device.
inline void check_loss_pair(const Tensor& input, const Tensor& target, const char* op) {
  check_defined(input, op);
  check_defined(target, op, "target");
  EMBER_CHECK(input.shape() == target.shape(), "[", op, "] input of shape ", shape_str(input.shape()),
              " and target of shape ", shape_str(target.shape()), " differ");
  check_floating(input, op);
  EMBER_CHECK(target.dtype() == input.dtype(), "[", op, "] input is ", input.dtype(), " but target is ",
              target.dtype(), " (shape ", shape_str(target.shape()), ")");
  check_same_device(input, target, op);
}

// An optional per-element weight (undefined: none) must broadcast to input's shape.
inline void check_loss_weight(const Tensor& weight, const Tensor& input, const char* op, const char* what) {
  if (!weight.defined()) return;
  EMBER_CHECK(broadcasts_to(weight.shape(), input.shape()), "[", op, "] ", what, " of shape ",
              shape_str(weight.shape()), " does not broadcast to input of shape ", shape_str(input.shape()));
  EMBER_CHECK(weight.dtype() == input.dtype(), "[", op, "] input is ", input.dtype(), " but ", what, " is ",
              weight.dtype());
  check_same_device(input, weight, op);
}

}  // namespace ember::ops
