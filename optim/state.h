#pragma once
// The per-parameter state helpers the update rules share (Note [Optimizers and parameter groups]).
#include <cstdint>
#include <map>
#include <string>

#include "core/memory_category.h"
#include "core/ops.h"

namespace ember::optim {

// The state slot, created on the parameter's first step as a tensor like it, filled with `value`.
inline Tensor& full_once(Tensor& slot, const Tensor& like, double value) {
  if (!slot.defined()) {
    slot = full(like.shape(), value, TensorOptions(like.dtype()).with_device(like.device()));
    memory::tag(slot, MemoryCategory::OptimizerState);  // Note [Memory by category]
  }
  return slot;
}
inline Tensor& zeros_once(Tensor& slot, const Tensor& like) { return full_once(slot, like, 0.0); }

// Advances the parameter's "step" counter (a 0-d int64 CPU tensor, created at 0) and returns the
// new count: 1 on its first step. Counted per parameter: one skipped while its grad was undefined
// does not advance.
inline int64_t count_step(std::map<std::string, Tensor>& state) {
  Tensor& count = state["step"];
  if (!count.defined()) {
    count = scalar_tensor(0.0, kInt64);
    memory::tag(count, MemoryCategory::OptimizerState);
  }
  const int64_t t = count.item<int64_t>() + 1;
  count.fill_(static_cast<double>(t));
  return t;
}

}  // namespace ember::optim
