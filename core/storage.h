#pragma once
// Storage: one allocation on one device, shared by every view of it. It also owns the
// version counter that in-place ops bump (see Note [Saved tensors and versions]).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/memory_category.h"

namespace ember {

struct VersionCounter {
  uint64_t value = 0;
};

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  const std::shared_ptr<VersionCounter>& version_counter() const { return version_; }
  uint64_t version() const { return version_->value; }
  void bump_version() { ++version_->value; }
  // Storages are numbered as they are made, from 1: one made before another has a smaller
  // serial. Checkpointing tells a tensor made before a region from one made inside it by this
  // (Note [Saved tensors not recomputed] in utils/checkpoint_value_check.cpp).
  uint64_t serial() const { return serial_; }
  static uint64_t next_serial();  // the serial the next storage will get
  // What the bytes hold (Note [Memory by category] in core/memory_category.h); with
  // only_from_other, only a storage still tagged Other changes.
  void tag(MemoryCategory category, int owner = -1, bool only_from_other = false);

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  uint64_t serial_;
  MemoryTag tag_;  // read and written under the allocator's lock only
  std::shared_ptr<VersionCounter> version_ = std::make_shared<VersionCounter>();
};

}  // namespace ember
