#include "utils/memory_timeline.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

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

// `text` as SVG text: labels and captions may hold an error message's quotes and brackets.
std::string xml_text(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&apos;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// `text`'s words in lines of at most `width` characters (a longer word gets a line of its own).
std::vector<std::string> wrapped(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  std::istringstream words(text);
  std::string word, line;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) lines.push_back(std::exchange(line, ""));
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
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

std::string timeline_svg(const std::vector<TimelineSeries>& series, const std::string& title,
                         const std::string& caption) {
  int64_t max_bytes = 1, tallest_request = 0;
  double max_ms = 1e-3;
  for (const auto& s : series) {
    for (const MemoryEvent& e : s.events) {
      max_bytes = std::max(max_bytes, e.live_bytes);
      max_ms = std::max(max_ms, e.time_ms);
    }
    max_bytes = std::max(max_bytes, s.limit_bytes);
    if (s.refused) {
      const RefusedRequest& r = *s.refused;
      max_bytes = std::max(max_bytes, r.live_bytes);
      // live + request, saturating: a refused request may be near 2^63 bytes
      const int64_t top = r.bytes > INT64_MAX - r.live_bytes ? INT64_MAX : r.live_bytes + r.bytes;
      tallest_request = std::max(tallest_request, top);
      max_ms = std::max(max_ms, r.time_ms);
    }
  }
  // A huge request would flatten every panel: it is cut at twice the rest.
  max_bytes = std::max(max_bytes, std::min(tallest_request, max_bytes > INT64_MAX / 2 ? INT64_MAX : 2 * max_bytes));
  const std::vector<std::string> caption_lines = wrapped(caption, 140);
  const double panels_end = kTop + static_cast<double>(series.size()) * (kPanelHeight + kGap);
  const double height = panels_end + 30 + 16 * static_cast<double>(caption_lines.size());
  const double plot_w = kWidth - kLeft - kRight, plot_h = kPanelHeight - 20;
  const double sx = plot_w / max_ms, sy = plot_h / static_cast<double>(max_bytes);
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << height
      << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << kLeft << "' y='24' font-size='16'>" << xml_text(title) << "</text>\n"
      << "<text x='" << kLeft << "' y='42' fill='#555'>live bytes over time (same scales in every panel); "
      << "blue background: backward; orange: checkpoint recomputation</text>\n";
  for (size_t p = 0; p < series.size(); ++p) {
    const auto& ev = series[p].events;
    const double top = kTop + static_cast<double>(p) * (kPanelHeight + kGap) + 10, base = top + plot_h;
    svg << "<text x='" << kLeft << "' y='" << top - 2 << "' font-weight='bold'>" << xml_text(series[p].label)
        << "</text>\n";
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
    if (const int64_t limit = series[p].limit_bytes; limit > 0) {
      const double ly = base - static_cast<double>(limit) * sy;
      svg << "<line x1='" << kLeft << "' x2='" << kLeft + plot_w << "' y1='" << ly << "' y2='" << ly
          << "' stroke='#7a1f1f' stroke-dasharray='8,3'/>\n<text x='" << kLeft + 4 << "' y='" << ly - 4
          << "' fill='#7a1f1f'>limit " << memory::format_bytes(limit) << " (on live and cached bytes)</text>\n";
    }
    if (const auto& r = series[p].refused) {
      const double x = kLeft + r->time_ms * sx, y_live = base - static_cast<double>(r->live_bytes) * sy;
      const int64_t room = max_bytes - r->live_bytes;  // what the panel shows above the live bytes
      const double y_top = base - static_cast<double>(r->live_bytes + std::min(r->bytes, room)) * sy;
      const bool left_of_bar = x > kLeft + plot_w / 2;
      svg << "<rect class='refused-request' x='" << x - 3 << "' y='" << y_top << "' width='6' height='"
          << std::max(y_live - y_top, 1.0) << "' fill='#d62728'/>\n<text x='" << (left_of_bar ? x - 8 : x + 8)
          << "' y='" << std::min(y_top + 12, base - 4) << "' text-anchor='" << (left_of_bar ? "end" : "start")
          << "' fill='#d62728'>refused: " << memory::format_bytes(r->bytes) << " for " << xml_text(r->label)
          << "</text>\n";
    }
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
  for (size_t i = 0; i < caption_lines.size(); ++i)
    svg << "<text x='" << kLeft << "' y='" << panels_end + 10 + 16 * static_cast<double>(i) << "'>"
        << xml_text(caption_lines[i]) << "</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

void write_timeline_svg(const std::string& path, const std::vector<TimelineSeries>& series, const std::string& title) {
  std::ofstream out(path);
  EMBER_CHECK(out, "[write_timeline_svg] cannot write '", path, "'");
  out << timeline_svg(series, title);
}

}  // namespace ember::utils
