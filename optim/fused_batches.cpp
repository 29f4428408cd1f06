#include "optim/fused_batches.h"

#include <algorithm>
#include <utility>

namespace ember::optim {

void FusedBatches::add(FusedParam param) {
  const Tensor& p = param.param;
  auto same = [&](const std::vector<FusedParam>& batch) {
    return batch.front().param.device() == p.device() && batch.front().param.dtype() == p.dtype();
  };
  auto batch = std::find_if(batches_.begin(), batches_.end(), same);
  if (batch == batches_.end()) batch = batches_.emplace(batches_.end());
  batch->push_back(std::move(param));
}

void FusedBatches::run(const OptimizerRule& rule) const {
  for (const auto& batch : batches_) fused_optimizer_step(rule, batch);
}

}  // namespace ember::optim
