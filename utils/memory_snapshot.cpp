#include "utils/memory_snapshot.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/memory_history.h"
#include "core/memory_limit.h"
#include "core/memory_phase.h"
#include "core/out_of_memory.h"
#include "serialize/json.h"
#include "utils/atomic_file.h"
#include "utils/memory_timeline.h"

namespace ember::utils {
namespace {

constexpr const char* kOp = "write_memory_snapshot";

std::string json_text(const std::vector<memory::HistoryEvent>& events, size_t after_failure, Device device,
                      const std::string& error_message) {
  const MemoryStats s = memory::stats(device);
  const std::optional<int64_t> limit = memory::limit(device);
  std::ostringstream out;
  out << "{\n  \"device\": " << json::quote(device.str()) << ",\n  \"error\": " << json::quote(error_message)
      << ",\n  \"limit_bytes\": " << (limit ? std::to_string(*limit) : "null")
      << ",\n  \"stats\": {\"live_bytes\": " << s.live_bytes << ", \"peak_bytes\": " << s.peak_bytes
      << ", \"reserved_bytes\": " << s.reserved_bytes << ", \"live_count\": " << s.live_count
      << ", \"alloc_count\": " << s.alloc_count << ", \"cache_hits\": " << s.cache_hits
      << ", \"system_allocs\": " << s.system_allocs << "},\n  \"events_after_failure\": " << after_failure
      << ",\n  \"events\": [";
  for (size_t i = 0; i < events.size(); ++i) {
    const memory::HistoryEvent& e = events[i];
    char time[32];
    std::snprintf(time, sizeof time, "%.3f", e.time_ms);
    out << (i ? ",\n" : "\n") << "    {\"time_ms\": " << time << ", \"delta_bytes\": " << e.delta_bytes
        << ", \"live_bytes\": " << e.live_bytes << ", \"op\": " << json::quote(e.op)
        << ", \"module\": " << json::quote(e.module) << ", \"phase\": " << json::quote(e.phase)
        << ", \"failed\": " << (e.failed ? "true" : "false") << "}";
  }
  out << (events.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out.str();
}

std::string svg_text(const std::vector<memory::HistoryEvent>& events, Device device, const std::string& error_message) {
  TimelineSeries series;
  series.label = detail::concat(device.str(), ": the last ", events.size(), " allocator event(s)");
  series.limit_bytes = memory::limit(device).value_or(0);
  const double start = events.empty() ? 0 : events.front().time_ms;  // the ring may have dropped the first ones
  for (const memory::HistoryEvent& e : events)
    if (!e.failed)  // a refused request changed nothing; the last one is marked below
      series.events.push_back({e.time_ms - start, e.live_bytes, e.delta_bytes, e.op.empty() ? nullptr : e.op.c_str(),
                               e.phase == memory::kBackwardPhase, e.phase == memory::kRecomputePhase});
  if (!events.empty() && events.back().failed) {
    const memory::HistoryEvent& e = events.back();
    series.refused = RefusedRequest{e.time_ms - start, e.live_bytes, e.delta_bytes,
                                    request_site(e.op.empty() ? "a tensor outside any op" : e.op, e.module, e.phase)};
  }
  const std::string title =
      detail::concat("memory snapshot of ", device.str(), series.refused ? " at the failure" : "");
  return timeline_svg({series}, title, error_message.substr(0, error_message.find('\n')));
}

void write_file(const std::string& path, const std::string& text) {
  AtomicFile file(path, kOp);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace

MemorySnapshotFiles write_memory_snapshot(const std::string& dir, Device device, const std::string& error_message) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  EMBER_CHECK(!error, "[", kOp, "] cannot make the folder '", dir, "': ", error.message());
  std::vector<memory::HistoryEvent> events = memory::history(device);
  size_t last_failure = events.size();
  for (size_t i = events.size(); i-- > 0;)
    if (events[i].failed) {
      last_failure = i;
      break;
    }
  const size_t after_failure = last_failure < events.size() ? events.size() - last_failure - 1 : 0;
  events.resize(events.size() - after_failure);
  const MemorySnapshotFiles files{(std::filesystem::path(dir) / "memory_snapshot.json").string(),
                                  (std::filesystem::path(dir) / "memory_snapshot.svg").string()};
  write_file(files.json, json_text(events, after_failure, device, error_message));
  write_file(files.svg, svg_text(events, device, error_message));
  return files;
}

}  // namespace ember::utils
