#include "distributed/buckets.h"

#include <optional>

#include "core/check.h"

namespace ember::distributed {

std::vector<BucketPlan> plan_buckets(const std::vector<Tensor>& parameters, size_t cap_bytes) {
  EMBER_CHECK(cap_bytes > 0, "[plan_buckets] the bucket cap must be > 0 bytes");
  std::vector<BucketPlan> buckets;
  // Per (dtype, device): the bucket still being filled, an index into `buckets`.
  std::vector<std::pair<std::pair<DType, Device>, size_t>> open;
  for (size_t i = parameters.size(); i-- > 0;) {
    const Tensor& p = parameters[i];
    if (!p.requires_grad()) continue;
    const std::pair key{p.dtype(), p.device()};
    std::optional<size_t> bucket;
    for (auto& [k, index] : open)
      if (k == key) bucket = index;
    const auto bytes = [&](int64_t numel) { return static_cast<size_t>(numel) * element_size(p.dtype()); };
    if (bucket && bytes(buckets[*bucket].numel + p.numel()) > cap_bytes) bucket.reset();
    if (!bucket) {
      bucket = buckets.size();
      buckets.push_back(BucketPlan{p.dtype(), p.device(), 0, {}});
      std::erase_if(open, [&](const auto& entry) { return entry.first == key; });
      open.emplace_back(key, *bucket);
    }
    BucketPlan& b = buckets[*bucket];
    b.slots.push_back(BucketSlot{i, b.numel, p.numel()});
    b.numel += p.numel();
  }
  return buckets;
}

}  // namespace ember::distributed
