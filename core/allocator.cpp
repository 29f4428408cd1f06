#include "core/allocator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "core/memory_history.h"
#include "core/memory_limit.h"
#include "core/out_of_memory.h"

namespace ember {

size_t Allocator::size_class(size_t nbytes) {
  constexpr size_t kSmall = 512, kLarge = 64 * 1024, kLargeFrom = 4 * 1024 * 1024;
  size_t unit = nbytes >= kLargeFrom ? kLarge : kSmall;
  return (nbytes + unit - 1) / unit * unit;
}

void* Allocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t wanted = size_class(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  size_t block = wanted;
  auto it = cache_.lower_bound(wanted);  // the smallest cached class that is big enough
  if (it != cache_.end() && reuses(it->first, wanted)) {
    block = it->first;
    ptr = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) cache_.erase(it);
    ++stats_.cache_hits;
  } else {
    // A fresh block: under the device's limit (Note [Memory limits] in core/memory_limit.h), and
    // what the system gives. Either way the cache is given back before the request fails.
    const int64_t limit = detail::enforced_memory_limit(device_);
    const auto fits = [&] { return fits_locked(limit, wanted); };
    if (!fits()) release_cache_locked();
    ptr = fits() ? system_alloc(wanted) : nullptr;
    if (!ptr && fits()) {  // the system refused: give the cache back and try once more
      release_cache_locked();
      ptr = system_alloc(wanted);
    }
    if (!ptr) {
      OutOfMemoryError::Facts facts;
      facts.device = device_;
      facts.requested_bytes = static_cast<int64_t>(nbytes);
      facts.limit_bytes = fits() ? 0 : limit;
      facts.live_bytes = stats_.live_bytes;
      facts.reserved_bytes = stats_.reserved_bytes;
      facts.held = live_by_category_locked();
      facts.advice = memory::out_of_memory_advice(device_);
      OutOfMemoryError::describe_request(facts);
      if (detail::history_on()) detail::record_failed_request(facts);  // Note [Memory history]
      throw OutOfMemoryError(std::move(facts), __FILE__, __LINE__);
    }
    ++stats_.system_allocs;
    stats_.reserved_bytes += static_cast<int64_t>(wanted);
  }
  block_class_[ptr] = block;
  ++stats_.alloc_count;
  ++stats_.live_count;
  stats_.live_bytes += static_cast<int64_t>(nbytes);
  count_locked(Tag{}, static_cast<int64_t>(nbytes));
  if (stats_.live_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.live_bytes;
  if (observer_) observer_(static_cast<int64_t>(nbytes), stats_.live_bytes);
  if (detail::history_on()) detail::record_history_event(device_, static_cast<int64_t>(nbytes), stats_.live_bytes);
  return ptr;
}

void Allocator::deallocate(void* ptr, size_t nbytes, Tag tag) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = block_class_.find(ptr);
  EMBER_CHECK(it != block_class_.end(), "[allocator] freeing a block of ", nbytes, " bytes that ", device_.str(),
              "'s allocator did not hand out");
  cache_[it->second].push_back(ptr);
  block_class_.erase(it);
  --stats_.live_count;
  stats_.live_bytes -= static_cast<int64_t>(nbytes);
  count_locked(tag, -static_cast<int64_t>(nbytes));
  if (observer_) observer_(-static_cast<int64_t>(nbytes), stats_.live_bytes);
  if (detail::history_on()) detail::record_history_event(device_, -static_cast<int64_t>(nbytes), stats_.live_bytes);
}

void Allocator::retag(size_t nbytes, Tag& tag, Tag to, bool only_from_other) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (only_from_other && tag.category != MemoryCategory::Other) return;
  count_locked(tag, -static_cast<int64_t>(nbytes));
  count_locked(to, static_cast<int64_t>(nbytes));
  tag = to;
}

void Allocator::count_locked(Tag tag, int64_t delta) {
  category_bytes_[static_cast<size_t>(tag.category)] += delta;
  if (tag.category != MemoryCategory::SavedForBackward) return;
  const size_t slot = static_cast<size_t>(tag.owner + 1);
  if (slot >= saved_by_owner_.size()) saved_by_owner_.resize(slot + 1, 0);
  saved_by_owner_[slot] += delta;
}

memory::LiveByCategory Allocator::live_by_category() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_by_category_locked();
}

memory::LiveByCategory Allocator::live_by_category_locked() const {
  memory::LiveByCategory out;
  out.bytes = category_bytes_;
  for (size_t slot = 0; slot < saved_by_owner_.size(); ++slot)
    if (saved_by_owner_[slot] != 0)
      out.saved_by_module.emplace_back(detail::owner_name(static_cast<int>(slot) - 1), saved_by_owner_[slot]);
  std::stable_sort(out.saved_by_module.begin(), out.saved_by_module.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

bool Allocator::fits_locked(int64_t limit, size_t nbytes) const {
  // reserved + nbytes <= limit, without overflowing for a huge request
  return limit == 0 || (stats_.reserved_bytes <= limit && nbytes <= static_cast<size_t>(limit - stats_.reserved_bytes));
}

bool Allocator::hold_outside_blocks(size_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t limit = detail::enforced_memory_limit(device_);
  const auto fits = [&] { return fits_locked(limit, nbytes); };
  if (!fits()) release_cache_locked();
  if (!fits()) return false;
  stats_.reserved_bytes += static_cast<int64_t>(nbytes);
  return true;
}

void Allocator::set_observer(Observer observer) {
  std::lock_guard<std::mutex> lock(mutex_);
  observer_ = std::move(observer);
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Allocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.live_bytes;
}

void Allocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cache_locked();
}

void Allocator::release_cache_locked() {
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) {
      system_free(p);
      stats_.reserved_bytes -= static_cast<int64_t>(size);
    }
  }
  cache_.clear();
}

namespace {

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() : Allocator(kCPU) {}
  ~CpuAllocator() override { release_cache_locked(); }

 protected:
  // 64-byte alignment: a cache line, and enough for any SIMD load the compiler emits.
  void* system_alloc(size_t nbytes) override { return std::aligned_alloc(64, nbytes); }
  void system_free(void* ptr) override { std::free(ptr); }
};

struct Registry {
  std::mutex mutex;
  std::array<std::function<std::unique_ptr<Allocator>(Device)>, kNumDeviceTypes> factories;
  std::map<std::pair<int, int>, std::unique_ptr<Allocator>> allocators;
};

Registry& registry() {
  // Never destroyed: storages held by static objects may be freed during exit.
  static Registry* r = [] {
    auto* reg = new Registry;
    reg->factories[static_cast<int>(DeviceType::CPU)] = [](Device) {
      return std::unique_ptr<Allocator>(new CpuAllocator);
    };
    return reg;
  }();
  return *r;
}

}  // namespace

void register_allocator_factory(DeviceType type, std::function<std::unique_ptr<Allocator>(Device)> f) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[static_cast<int>(type)] = std::move(f);
}

Allocator& allocator_for(Device device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto key = std::make_pair(static_cast<int>(device.type), device.index);
  auto it = r.allocators.find(key);
  if (it != r.allocators.end()) return *it->second;
  auto& factory = r.factories[static_cast<int>(device.type)];
  EMBER_CHECK(factory, "[allocator] no allocator for ", device.str(), " (built without CUDA)");
  return *(r.allocators[key] = factory(device));
}

namespace memory {

MemoryStats stats(Device device) { return allocator_for(device).stats(); }
void reset_peak(Device device) { allocator_for(device).reset_peak(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while ((v >= 1024.0 || v <= -1024.0) && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string summary(Device device) {
  MemoryStats s = stats(device);
  return detail::concat("memory on ", device.str(), ": live ", format_bytes(s.live_bytes), " in ",
                        s.live_count, " storage(s), peak ", format_bytes(s.peak_bytes), ", reserved ",
                        format_bytes(s.reserved_bytes), "; ", s.alloc_count, " allocation(s), ",
                        s.cache_hits, " from the cache, ", s.system_allocs, " from the system");
}

}  // namespace memory
}  // namespace ember
