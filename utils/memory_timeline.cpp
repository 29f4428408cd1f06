#include "utils/memory_timeline.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/allocator.h"
#include "core/autograd/op_label.h"
#include "core/autograd/recompute.h"
#include "core/check.h"

namespace ember::utils {

MemoryTimeline::MemoryTimeline(Device device) : device_(device) {
  const auto start = std::chrono::steady_clock::now();
  // The observer owns a reference to the event list, so a late event after stop() is harmless.
  allocator_for(device).set_observer([events = events_, start](int64_t delta, int64_t live) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    autograd::OpLabel label = autograd::current_op_label();
    events->push_back({ms, live, delta, label.op, label.backward, autograd::is_recomputing()});
  });
}

MemoryTimeline::~MemoryTimeline() { stop(); }

void MemoryTimeline::stop() {
  if (!recording_) return;
  allocator_for(device_).set_observer(nullptr);
  recording_ = false;
}

int64_t MemoryTimeline::peak_bytes() const {
  int64_t peak = 0;
  for (const MemoryEvent& e : *events_) peak = std::max(peak, e.live_bytes);
  return peak;
}

namespace {

constexpr double kWidth = 960, kPanelHeight = 220, kLeft = 80, kRight = 20, kTop = 50, kGap = 40;

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// Spans [first, last) of consecutive events for which `pred` holds, in the panel's x units.
template <class Pred>
void shade(std::ostringstream& svg, const std::vector<MemoryEvent>& ev, Pred pred, double x0, double sx, double y,
           double h, const char* fill) {
  for (size_t i = 0; i < ev.size();) {
    if (!pred(ev[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < ev.size() && pred(ev[j + 1])) ++j;
    const double a = x0 + ev[i].time_ms * sx, b = x0 + ev[std::min(j + 1, ev.size() - 1)].time_ms * sx;
    svg << "<rect x='" << a << "' y='" << y << "' width='" << std::max(b - a, 1.0) << "' height='" << h << "' fill='"
        << fill << "'/>\n";
    i = j + 1;
  }
}

}  // namespace

std::string timeline_svg(const std::vector<TimelineSeries>& series, const std::string& title) {
  int64_t max_bytes = 1;
  double max_ms = 1e-3;
  for (const auto& s : series)
    for (const MemoryEvent& e : s.events) {
      max_bytes = std::max(max_bytes, e.live_bytes);
      max_ms = std::max(max_ms, e.time_ms);
    }
  const double height = kTop + static_cast<double>(series.size()) * (kPanelHeight + kGap) + 30;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kPanelHeight - 20;
  const double sx = plot_w / max_ms, sy = plot_h / static_cast<double>(max_bytes);
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << height
      << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << kLeft << "' y='24' font-size='16'>" << title << "</text>\n"
      << "<text x='" << kLeft << "' y='42' fill='#555'>live bytes over time (same scales in every panel); "
      << "blue background: backward; orange: checkpoint recomputation</text>\n";
  for (size_t p = 0; p < series.size(); ++p) {
    const auto& ev = series[p].events;
    const double top = kTop + static_cast<double>(p) * (kPanelHeight + kGap) + 10, base = top + plot_h;
    svg << "<text x='" << kLeft << "' y='" << top - 2 << "' font-weight='bold'>" << series[p].label << "</text>\n";
    shade(svg, ev, [](const MemoryEvent& e) { return e.backward; }, kLeft, sx, top, plot_h, "#e8f0fb");
    shade(svg, ev, [](const MemoryEvent& e) { return e.recomputing; }, kLeft, sx, top, plot_h, "#fbd9b0");
    svg << "<polyline fill='none' stroke='#1f4e9c' stroke-width='1.2' points='";
    double last_y = base;
    for (const MemoryEvent& e : ev) {  // a step plot: the level holds until the next event
      const double x = kLeft + e.time_ms * sx, y = base - static_cast<double>(e.live_bytes) * sy;
      svg << x << ',' << last_y << ' ' << x << ',' << y << ' ';
      last_y = y;
    }
    svg << "'/>\n";
    int64_t peak = 0;
    for (const MemoryEvent& e : ev) peak = std::max(peak, e.live_bytes);
    const double py = base - static_cast<double>(peak) * sy;
    svg << "<line x1='" << kLeft << "' x2='" << kLeft + plot_w << "' y1='" << py << "' y2='" << py
        << "' stroke='#c0392b' stroke-dasharray='4,3'/>\n<text x='" << kLeft + plot_w - 4 << "' y='" << py - 4
        << "' text-anchor='end' fill='#c0392b'>peak " << mib(peak) << "</text>\n";
    svg << "<line x1='" << kLeft << "' x2='" << kLeft << "' y1='" << top << "' y2='" << base << "' stroke='black'/>\n"
        << "<line x1='" << kLeft << "' x2='" << kLeft + plot_w << "' y1='" << base << "' y2='" << base
        << "' stroke='black'/>\n";
    for (int t = 0; t <= 4; ++t) {
      const int64_t b = max_bytes * t / 4;
      const double y = base - static_cast<double>(b) * sy;
      svg << "<text x='" << kLeft - 6 << "' y='" << y + 4 << "' text-anchor='end'>" << mib(b) << "</text>\n";
    }
    svg << "<text x='" << kLeft + plot_w << "' y='" << base + 16 << "' text-anchor='end'>" << static_cast<int>(max_ms)
        << " ms</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

void write_timeline_svg(const std::string& path, const std::vector<TimelineSeries>& series, const std::string& title) {
  std::ofstream out(path);
  EMBER_CHECK(out, "[write_timeline_svg] cannot write '", path, "'");
  out << timeline_svg(series, title);
}

}  // namespace ember::utils
