#pragma once
// Note [Memory history]
// An OutOfMemoryError (core/out_of_memory.h) says which request met the wall, but not how memory
// got there: which ops and modules filled it, whether the forward climbed too high or the
// backward did. When asked (memory::record_history(true), or --memory-snapshot on the example
// programs), every device's allocator also records each allocation and free: its time, the change,
// the live bytes after it, and the op, module and phase that made it (as the error names them).
// A request the allocator refuses is recorded too, marked failed, just before the error is thrown,
// so the history still holds it after the throw; utils::write_memory_snapshot writes it as JSON
// and draws it (docs/memory.md, "Reading a memory snapshot").
//
// Each device keeps its last max_events events in a ring buffer: a long run's history costs a
// bounded amount of memory, and what is kept is what led to the failure. The frees that follow a
// failure (the error unwinding the stack) are recorded like any others; a snapshot ends at the
// failed request. Off, which is the default, recording costs the allocator one relaxed load of an
// atomic bool per allocation and free. On, each event takes a lock and builds the module path.
// The events are kept after recording stops, until it starts again.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/out_of_memory.h"

namespace ember {
namespace memory {

struct HistoryEvent {
  double time_ms = 0;  // since record_history(true)
  Device device;
  int64_t delta_bytes = 0;  // + an allocation, - a free; for a failed request, the bytes it asked for
  int64_t live_bytes = 0;   // held by tensors after the event (a failed request changes nothing)
  std::string op;           // the op whose forward or backward ran; "" outside any op
  std::string module;       // the module being called ("blocks.3.mlp"); "" outside any call
  std::string phase;        // "forward", "backward", ... (core/memory_phase.h); "" if none
  bool failed = false;      // the request the allocator refused with an OutOfMemoryError
};

// Starts recording every device's allocations and frees, keeping each device's last `max_events`
// (> 0); the events recorded before are dropped and the clock restarts. record_history(false)
// stops recording and keeps the events.
void record_history(bool enabled, size_t max_events = 20000);
bool recording_history();
// The events kept for `device`, oldest first.
std::vector<HistoryEvent> history(Device device = kCPU);

}  // namespace memory

namespace detail {

extern std::atomic<bool> history_enabled;
// What the allocator asks, under its lock, before recording (Note [Memory history]).
inline bool history_on() { return history_enabled.load(std::memory_order_relaxed); }
// An allocation (delta > 0) or a free (delta < 0) that left `live_bytes` live on `device`.
void record_history_event(Device device, int64_t delta_bytes, int64_t live_bytes);
// The request an OutOfMemoryError with these facts refuses, recorded before it is thrown.
void record_failed_request(const OutOfMemoryError::Facts& facts);

}  // namespace detail
}  // namespace ember
