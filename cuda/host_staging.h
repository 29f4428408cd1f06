#pragma once
// Host -> device copies that do not wait for the device: the source is copied into a pinned
// staging buffer and DMA'd from there on the device's stream. Note [Staged host-to-device
// copies] in cuda/host_staging.cpp.
#include <cstddef>

namespace ember::cuda {

// Queues the copy of `nbytes` of ordinary (pageable) host memory at `src` to device memory `dst`
// on device `index`'s stream and returns without waiting; `src` may be overwritten or freed at
// once. Returns false, having done nothing, when the copy is too large to stage or no staging
// buffer can be had; the caller then copies synchronously.
bool copy_to_device_staged(int index, void* dst, const void* src, size_t nbytes);

// The size of the pinned buffer that stages `nbytes`: a power of two of at least 64 KiB, so a
// few buffers serve batches of every size. 0 above kMaxStagedBytes (the copy is not staged).
inline constexpr size_t kMaxStagedBytes = size_t{64} << 20;
size_t staging_size(size_t nbytes);

}  // namespace ember::cuda
