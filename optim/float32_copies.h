#pragma once
// How an optimizer steps a 16-bit parameter: through float32 copies, with float32 state.
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::optim {

// Note [Sixteen-bit parameters step in float32]
// A bfloat16 weight holds 8 significant bits: an update smaller than 1/256 of the weight rounds
// away, and a moment (Adam's exp_avg_sq is a square) kept in bfloat16 loses most of what it
// averages. So a 16-bit parameter steps as a float32 copy of itself and of its gradient: the
// update rule, fused or composed, runs in float32 against state kept in float32 (state_dtype),
// and the result is rounded into the parameter once. PyTorch keeps the state in the parameter's
// dtype; here the state costs two bytes more per element and per state tensor, and the step
// loses no more than the parameter's own rounding.
class Float32Copies {
 public:
  struct Work {
    Tensor param, grad;  // what the update rule steps: the parameter's own, or float32 copies
  };
  Work prepare(const Tensor& param);
  void write_back() const;  // each copy rounded into its parameter

 private:
  std::vector<std::pair<Tensor, Tensor>> copies_;  // (16-bit parameter, its float32 copy)
};

// The dtype of a parameter's state: its own, float32 for a 16-bit one.
inline DType state_dtype(const Tensor& param) {
  return is_sixteen_bit(param.dtype()) ? kFloat32 : param.dtype();
}

}  // namespace ember::optim
