#pragma once
// Note [Gradient buckets]
// DistributedDataParallel does not reduce each gradient on its own (many small messages, each
// paying the latency) nor all of them at the end (nothing left to overlap with): it packs the
// parameters into buckets of about `cap_bytes` and reduces a bucket as soon as all of its
// gradients have been computed. Backward produces gradients roughly in the reverse of the order
// the parameters were registered (the last layer's first), so the parameters are packed in that
// reverse order: the first bucket fills first, and its reduction runs while backward still
// computes the gradients of the earlier layers. A bucket holds one dtype on one device (it is
// reduced as one flat tensor); a parameter larger than the cap gets a bucket of its own.
// Every rank builds the same plan from the same model, so the buckets line up across ranks.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember::distributed {

struct BucketSlot {
  size_t parameter = 0;  // index into the parameter list the plan was made from
  int64_t offset = 0;    // where its gradient starts in the bucket's flat buffer
  int64_t numel = 0;
};

struct BucketPlan {
  DType dtype = kFloat32;
  Device device = kCPU;
  int64_t numel = 0;
  std::vector<BucketSlot> slots;  // in the order backward is expected to fill them
};

inline constexpr size_t kDefaultBucketCapBytes = size_t{25} << 20;  // 25 MiB, as PyTorch's DDP

// Buckets for the parameters that require grad, in launch order.
std::vector<BucketPlan> plan_buckets(const std::vector<Tensor>& parameters, size_t cap_bytes = kDefaultBucketCapBytes);

}  // namespace ember::distributed
