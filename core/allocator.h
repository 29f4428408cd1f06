#pragma once
// Note [Caching allocator and exact statistics]
// Every tensor's bytes come from the allocator of its device. Freed blocks are not returned to
// the system but kept in a cache keyed by their size class and handed out again: a training
// step allocates the same sizes every iteration, so after the first step there are no system
// allocations (and no page faults) at all. A request takes the smallest cached block that is big
// enough and at most twice its size (Allocator::reuses), so tensors whose sizes vary from step to
// step reuse each other's blocks instead of each reserving its own. They vary wherever batches
// do: finetune_text cuts each batch to its longest text, so its activations change size with
// every batch. When a block served requests at most an eighth smaller, nearly every new length
// took fresh memory from the system, and the kernel zeroing those pages on first touch was a
// large part of finetune_text's time (perf); reuse up to twice the request made its step faster
// (bench/RESULTS.md, "Fine-tuning all-MiniLM-L6-v2 against PyTorch"). The price is reserved
// memory, not live memory: a tensor may sit in a block up to twice its size. The same class
// serves the CPU (aligned malloc) and CUDA (cudaMalloc); a backend only supplies
// system_alloc/system_free.
//
// Statistics count the bytes tensors asked for, not the rounded or reused block sizes, so a test
// can predict them exactly: live_bytes is the sum of nbytes of every storage alive right now,
// peak_bytes the maximum live_bytes since the last reset_peak(). reserved_bytes is what the
// allocator holds from the system (live blocks + cache, rounded).
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "core/memory_category.h"

namespace ember {

struct MemoryStats {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t live_count = 0;     // storages alive
  int64_t alloc_count = 0;    // allocate() calls since start
  int64_t cache_hits = 0;     // of those, served from the cache
  int64_t system_allocs = 0;  // blocks obtained from the system
};

class Allocator {
 public:
  explicit Allocator(Device device) : device_(device) {}
  virtual ~Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // A live block's tag is its storage's, read and written under the allocator's lock only
  // (retag), and given back with the block.
  using Tag = MemoryTag;

  void* allocate(size_t nbytes);  // tagged Other
  void deallocate(void* ptr, size_t nbytes, Tag tag = {});
  // Moves a live block's `nbytes` from `tag`'s category to `to`'s and sets `tag` to `to`; with
  // only_from_other, only a block still tagged Other moves.
  void retag(size_t nbytes, Tag& tag, Tag to, bool only_from_other = false);
  memory::LiveByCategory live_by_category() const;
  // Counts `nbytes` that ember holds on this device outside the allocator's blocks (CUDA's pinned
  // host staging buffers, kept for the process) in reserved_bytes, under the device's limit: the
  // cache is given back first if they would take the allocator past it, and false, counting
  // nothing, when they still would.
  bool hold_outside_blocks(size_t nbytes);

  MemoryStats stats() const;
  void reset_peak();
  // Called after every allocation and free with the change and the new live bytes (the memory
  // timeline records through it). It runs under the allocator's lock: it must not allocate
  // tensors. An empty function removes it.
  using Observer = std::function<void(int64_t delta_bytes, int64_t live_bytes)>;
  void set_observer(Observer observer);
  void empty_cache();
  Device device() const { return device_; }

  // The size class of a request: what a fresh block for it holds. Multiples of 512 bytes below
  // 4 MiB and of 64 KiB above, so rounding wastes at most ~1.5% of a large block.
  static size_t size_class(size_t nbytes);
  // Whether a cached block of class `block` may serve a request of class `wanted`: big enough,
  // and at most twice as large, so that reuse wastes at most half a block.
  static bool reuses(size_t block, size_t wanted) { return block >= wanted && block - wanted <= wanted; }

 protected:
  // Release every cached block; a backend's destructor calls this while it can still free.
  void release_cache_locked();
  memory::LiveByCategory live_by_category_locked() const;
  void count_locked(Tag tag, int64_t delta);             // live bytes by category: Note [Memory by category]
  bool fits_locked(int64_t limit, size_t nbytes) const;  // under `limit` (0: none) with nbytes more reserved
  virtual void* system_alloc(size_t nbytes) = 0;  // nullptr when out of memory
  virtual void system_free(void* ptr) = 0;

 private:
  Device device_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> cache_;     // size class -> free blocks (no empty entries)
  std::unordered_map<void*, size_t> block_class_;  // live block -> its size class
  MemoryStats stats_;
  std::array<int64_t, kNumMemoryCategories> category_bytes_{};
  std::vector<int64_t> saved_by_owner_;  // SavedForBackward bytes by owner id + 1
  Observer observer_;
};

// The allocator of a device. CPU's always exists; a backend registers a factory for its type.
Allocator& allocator_for(Device device);
void register_allocator_factory(DeviceType type, std::function<std::unique_ptr<Allocator>(Device)> f);

namespace memory {
MemoryStats stats(Device device = kCPU);
void reset_peak(Device device = kCPU);
void empty_cache(Device device = kCPU);
std::string summary(Device device = kCPU);  // a few human-readable lines
std::string format_bytes(int64_t bytes);    // "1.50 MiB"
}  // namespace memory

}  // namespace ember
