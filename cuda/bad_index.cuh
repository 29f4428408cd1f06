#pragma once
// The device side of Note [Index errors found on the device] (cuda/bad_index.h).
#include "cuda/bad_index.h"

namespace ember::cuda {

// Whether 0 <= value < size; if not, records the first bad index of the device (see the Note).
__device__ inline bool index_in_range(BadIndex* record, IndexCheck check, int64_t value, int64_t size) {
  if (value >= 0 && value < size) return true;
  if (atomicCAS(&record->found, 0, 1) == 0) {
    record->check = static_cast<int32_t>(check);
    record->value = value;
    record->size = size;
  }
  return false;
}

}  // namespace ember::cuda
