#include "cuda/host_staging.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace ember::cuda {

// Note [Staged host-to-device copies]
// A copy from pageable host memory is synchronous in effect: CUDA may read the source after
// cudaMemcpyAsync returns, so ember used to wait for the stream, which also waits for every
// kernel queued before the copy, and a training loop's batch upload stalled until the previous
// step had finished on the GPU. Instead the host copies the source into a pinned (page-locked,
// cudaHostAlloc'd) staging buffer, queues the DMA from that buffer on the device's stream and
// records an event after it. The caller's memory is free as soon as the memcpy is done, and the
// host runs ahead of the device. A buffer is handed out again only when its event has completed,
// that is when the device has finished reading it; until then the next copy takes another
// buffer, or allocates one while the pool holds less than kMaxPoolBytes. When neither works, the
// copy falls back to the synchronous path rather than wait here. Copies above kMaxStagedBytes
// (weights loaded once) also take the synchronous path: they are rare, and would pin a lot of
// memory. Device -> host copies always wait: the caller reads the result next. The pool's buffers
// count in the CPU allocator's reserved bytes, under its limit: a buffer that would take it past
// the limit is not made, and the copy takes the synchronous path.

namespace {

constexpr size_t kMinStagingBytes = size_t{64} << 10;
constexpr size_t kMaxPoolBytes = size_t{256} << 20;

struct Buffer {
  void* host = nullptr;
  size_t bytes = 0;
  cudaEvent_t read = nullptr;  // recorded after the copy that last read this buffer
};

struct Pool {
  std::mutex mutex;
  std::vector<Buffer> buffers;
  size_t pinned_bytes = 0;
};

Pool& pool(int index) {
  // Never destroyed, like the streams (Note [One stream per device]).
  static Pool* pools = new Pool[static_cast<size_t>(device_count() > 0 ? device_count() : 1)];
  check_device(Device(DeviceType::CUDA, index));
  return pools[index];
}

// A buffer of `bytes` that no queued copy still reads, or null. Caller holds the pool's mutex.
Buffer* free_buffer(Pool& p, size_t bytes) {
  for (Buffer& b : p.buffers) {
    if (b.bytes != bytes) continue;
    const cudaError_t state = cudaEventQuery(b.read);  // cudaSuccess also for a never-recorded event
    if (state == cudaSuccess) return &b;
    if (state != cudaErrorNotReady) CUDA_CHECK(state);
  }
  if (p.pinned_bytes + bytes > kMaxPoolBytes) return nullptr;
  Buffer b;
  if (cudaHostAlloc(&b.host, bytes, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();  // pinned memory is limited: not an error, the copy waits instead
    return nullptr;
  }
  // Pinned memory is the host's: it counts against the CPU's limit (Note [Memory limits]).
  if (!allocator_for(kCPU).hold_outside_blocks(bytes)) {
    CUDA_CHECK(cudaFreeHost(b.host));
    return nullptr;
  }
  CUDA_CHECK(cudaEventCreateWithFlags(&b.read, cudaEventDisableTiming));
  b.bytes = bytes;
  p.pinned_bytes += bytes;
  p.buffers.push_back(b);
  return &p.buffers.back();
}

}  // namespace

size_t staging_size(size_t nbytes) {
  if (nbytes > kMaxStagedBytes) return 0;
  size_t size = kMinStagingBytes;
  while (size < nbytes) size *= 2;
  return size;
}

bool copy_to_device_staged(int index, void* dst, const void* src, size_t nbytes) {
  const size_t bytes = staging_size(nbytes);
  if (bytes == 0) return false;
  Pool& p = pool(index);
  DeviceGuard guard(index);
  cudaStream_t s = stream(index);
  std::lock_guard<std::mutex> lock(p.mutex);
  Buffer* b = free_buffer(p, bytes);
  if (!b) return false;
  std::memcpy(b->host, src, nbytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, b->host, nbytes, cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaEventRecord(b->read, s));
  return true;
}

}  // namespace ember::cuda
