#pragma once
// Memory timeline: records every allocation and free of a device's allocator with the op that
// caused it, whether it happened in backward and whether a checkpoint was recomputing, and draws
// live bytes over time as an SVG — the picture explanations of checkpointing usually draw by hand.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"

namespace ember::utils {

struct MemoryEvent {
  double time_ms;      // since the recording started
  int64_t live_bytes;  // after the event
  int64_t delta_bytes;
  const char* op;  // the op running (nullptr outside ops)
  bool backward;
  bool recomputing;
};

// Records while alive (or until stop()). One recorder per device at a time.
class MemoryTimeline {
 public:
  explicit MemoryTimeline(Device device = kCPU);
  ~MemoryTimeline();
  MemoryTimeline(const MemoryTimeline&) = delete;
  MemoryTimeline& operator=(const MemoryTimeline&) = delete;

  void stop();
  const std::vector<MemoryEvent>& events() const { return *events_; }
  int64_t peak_bytes() const;

 private:
  Device device_;
  bool recording_ = true;
  std::shared_ptr<std::vector<MemoryEvent>> events_ = std::make_shared<std::vector<MemoryEvent>>();
};

// A request the allocator refused (an OutOfMemoryError), for a panel to mark where it came.
struct RefusedRequest {
  double time_ms = 0;
  int64_t live_bytes = 0;  // held by tensors when it came
  int64_t bytes = 0;       // what it asked for
  std::string label;       // who asked: "matmul (forward, module 'fc2')"
};

struct TimelineSeries {
  std::string label;  // "no checkpointing", "4 segments", ...
  std::vector<MemoryEvent> events;
  std::optional<RefusedRequest> refused = std::nullopt;  // none: nothing failed
  int64_t limit_bytes = 0;                               // the device's memory limit (Note [Memory limits]); 0: none
};

// One panel per series, sharing the byte axis: live bytes over time, the backward on a tinted
// background, checkpoint recomputation shaded, each peak marked; a memory limit as a line, and a
// refused request as a red bar standing on the live bytes at its time, as tall as the request
// (cut at twice the panel's other highest value; the label gives its size). `caption`, if any,
// goes under the panels, wrapped to the picture's width.
std::string timeline_svg(const std::vector<TimelineSeries>& series, const std::string& title,
                         const std::string& caption = "");
void write_timeline_svg(const std::string& path, const std::vector<TimelineSeries>& series, const std::string& title);

}  // namespace ember::utils
