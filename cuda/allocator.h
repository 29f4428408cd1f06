#pragma once
// The CUDA caching allocator: ember's Allocator (size buckets, exact statistics; see
// Note [Caching allocator and exact statistics]) over cudaMalloc/cudaFree. One per device,
// created by the factory registered for DeviceType::CUDA the first time a device is used.
#include "core/allocator.h"

namespace ember::cuda {

class CudaAllocator final : public Allocator {
 public:
  // Throws ember::Error when `device` does not exist (no GPU, no driver, index out of range),
  // so creating a CUDA tensor on such a machine is a clear error, not a crash.
  explicit CudaAllocator(Device device);
  ~CudaAllocator() override;

 protected:
  void* system_alloc(size_t nbytes) override;  // nullptr when the device is out of memory
  void system_free(void* ptr) override;
};

}  // namespace ember::cuda
