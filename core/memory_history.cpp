#include "core/memory_history.h"

#include <chrono>
#include <map>
#include <mutex>
#include <utility>

#include "core/check.h"

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;

// A device's last events: `events` grows to `capacity`, then `next` is the oldest, overwritten next.
struct Ring {
  std::vector<memory::HistoryEvent> events;
  size_t next = 0;
};

struct History {
  std::mutex mutex;
  size_t capacity = 0;
  Clock::time_point start;
  std::map<std::pair<int, int>, Ring> rings;  // by (device type, index)
};

History& state() {
  static History* h = new History;  // never destroyed: storages held by static objects are freed during exit
  return *h;
}

std::pair<int, int> key(Device device) { return {static_cast<int>(device.type), device.index}; }

void record(memory::HistoryEvent event) {
  History& h = state();
  std::lock_guard<std::mutex> lock(h.mutex);
  if (!detail::history_on()) return;  // stopped while this event's description was being built
  event.time_ms = std::chrono::duration<double, std::milli>(Clock::now() - h.start).count();
  Ring& ring = h.rings[key(event.device)];
  if (ring.events.size() < h.capacity) {
    ring.events.push_back(std::move(event));
  } else {
    ring.events[ring.next] = std::move(event);
    ring.next = (ring.next + 1) % h.capacity;
  }
}

}  // namespace

namespace detail {

std::atomic<bool> history_enabled{false};

void record_history_event(Device device, int64_t delta_bytes, int64_t live_bytes) {
  OutOfMemoryError::Facts where;  // the op, module and phase, as an error would name them
  OutOfMemoryError::describe_request(where);
  record({0, device, delta_bytes, live_bytes, std::move(where.op), std::move(where.module), std::move(where.phase),
          /*failed=*/false});
}

void record_failed_request(const OutOfMemoryError::Facts& facts) {
  record({0, facts.device, facts.requested_bytes, facts.live_bytes, facts.op, facts.module, facts.phase,
          /*failed=*/true});
}

}  // namespace detail

namespace memory {

void record_history(bool enabled, size_t max_events) {
  EMBER_CHECK(!enabled || max_events > 0, "[memory::record_history] max_events must be positive, got ", max_events);
  History& h = state();
  std::lock_guard<std::mutex> lock(h.mutex);
  if (enabled) {
    h.rings.clear();
    h.capacity = max_events;
    h.start = Clock::now();
  }
  detail::history_enabled.store(enabled, std::memory_order_relaxed);
}

bool recording_history() { return detail::history_on(); }

std::vector<HistoryEvent> history(Device device) {
  History& h = state();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto it = h.rings.find(key(device));
  if (it == h.rings.end()) return {};
  const Ring& ring = it->second;
  std::vector<HistoryEvent> oldest_first(ring.events.begin() + static_cast<std::ptrdiff_t>(ring.next),
                                         ring.events.end());
  oldest_first.insert(oldest_first.end(), ring.events.begin(),
                      ring.events.begin() + static_cast<std::ptrdiff_t>(ring.next));
  return oldest_first;
}

}  // namespace memory
}  // namespace ember
