#include "cuda/allocator.h"

#include "core/memory_limit.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace ember::cuda {

CudaAllocator::CudaAllocator(Device device) : Allocator(device) { check_device(device); }

CudaAllocator::~CudaAllocator() {
  try {
    release_cache_locked();
  } catch (const Error&) {
    // cudaFree fails once the runtime is shutting down; the driver frees the memory anyway.
  }
}

// Note [Freeing blocks that kernels may still use]
// The host frees a tensor as soon as its last handle goes, while kernels queued on the stream
// may still read it. The block is not given back to CUDA but cached, and the next tensor that
// gets it is only touched by work queued later on the same stream (Note [One stream per
// device]), so the reuse is ordered after the old reads. cudaFree (empty_cache) synchronises
// the device itself before releasing memory.
void* CudaAllocator::system_alloc(size_t nbytes) {
  DeviceGuard guard(device().index);
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, nbytes);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // out of memory is recoverable: the caller frees its cache and retries
    return nullptr;
  }
  CUDA_CHECK(err);
  return ptr;
}

void CudaAllocator::system_free(void* ptr) {
  DeviceGuard guard(device().index);
  CUDA_CHECK(cudaFree(ptr));
}

namespace {

// The card's memory, what memory::set_limit_fraction takes a fraction of.
int64_t card_bytes(int index) {
  check_device(Device(DeviceType::CUDA, index));
  DeviceGuard guard(index);
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(total);
}

// Only stores the factory and the query (Note [No CUDA calls during static initialisation]).
const bool registered = [] {
  register_allocator_factory(DeviceType::CUDA,
                             [](Device device) -> std::unique_ptr<Allocator> { return std::make_unique<CudaAllocator>(device); });
  detail::register_device_memory(DeviceType::CUDA, &card_bytes);
  return true;
}();

}  // namespace
}  // namespace ember::cuda
