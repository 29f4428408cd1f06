#include "core/storage.h"

#include <atomic>

#include "core/allocator.h"

namespace ember {
namespace {
std::atomic<uint64_t> storages_made{0};
}  // namespace

uint64_t Storage::next_serial() { return storages_made.load(std::memory_order_relaxed) + 1; }

Storage::Storage(size_t nbytes, Device device)
    : data_(allocator_for(device).allocate(nbytes)), nbytes_(nbytes), device_(device),
      serial_(storages_made.fetch_add(1, std::memory_order_relaxed) + 1) {}

Storage::~Storage() { allocator_for(device_).deallocate(data_, nbytes_, tag_); }

void Storage::tag(MemoryCategory category, int owner, bool only_from_other) {
  if (nbytes_ == 0) return;
  allocator_for(device_).retag(nbytes_, tag_, {category, owner}, only_from_other);
}

}  // namespace ember
