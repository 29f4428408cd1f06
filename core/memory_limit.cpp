#include "core/memory_limit.h"

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

#include "core/allocator.h"
#include "core/check.h"
#include "core/system_memory.h"

namespace ember {
namespace {

constexpr int kMaxIndex = 64;  // device indices a limit can name

// Bytes per (device type, index); 0 is no limit. Read on every fresh block, so atomics.
std::array<std::array<std::atomic<int64_t>, kMaxIndex>, kNumDeviceTypes> limits{};
std::array<std::atomic<int64_t (*)(int)>, kNumDeviceTypes> device_memory{};

std::atomic<int64_t>& slot(Device device, const char* op) {
  EMBER_CHECK(device.index >= 0 && device.index < kMaxIndex, "[", op, "] ", device.str(), ": a limit can name ",
              "device indices 0 to ", kMaxIndex - 1);
  return limits[static_cast<size_t>(device.type)][static_cast<size_t>(device.index)];
}

// EMBER_MEMORY_LIMIT, read once (Note [Memory limits]); a bad value's error is repeated until the
// program sets or clears a limit itself.
struct Environment {
  std::once_flag read;
  std::atomic<bool> bad{false};
  std::string error;
};
Environment& environment() {
  static Environment env;
  return env;
}

// "cpu", "cuda" or "cuda:N", as Device(spec) reads them.
Device parse_device(std::string_view text) {
  try {
    return Device(std::string(text));
  } catch (const std::exception&) {  // Device's own error, or the index's std::out_of_range
    EMBER_FAIL("[EMBER_MEMORY_LIMIT] unknown device '", text, "' (cpu, cuda or cuda:N)");
  }
}

void apply_environment(std::string_view value) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view entry = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    const size_t colon = entry.rfind(':');
    EMBER_CHECK(colon != std::string_view::npos && colon > 0, "[EMBER_MEMORY_LIMIT] '", entry,
                "' is not DEVICE:SIZE (e.g. cpu:2GiB, cuda:0:50%)");
    const Device device = parse_device(entry.substr(0, colon));
    const std::string what = detail::concat("EMBER_MEMORY_LIMIT's ", device.str());
    const std::string_view size = entry.substr(colon + 1);
    const int64_t whole = size.ends_with('%') ? memory::device_memory_bytes(device) : 0;
    slot(device, "EMBER_MEMORY_LIMIT").store(memory::parse_bytes(size, whole, what.c_str()));
  }
}

void read_environment() {
  const char* value = std::getenv("EMBER_MEMORY_LIMIT");
  if (value == nullptr) return;
  Environment& env = environment();
  try {
    apply_environment(value);
  } catch (const Error& e) {
    env.error = e.message();
    env.bad = true;
  }
}

void read_environment_once() { std::call_once(environment().read, read_environment); }

// A program that sets or clears a limit has decided for itself: the environment's error is over.
void settle_environment() {
  read_environment_once();
  environment().bad = false;
}

}  // namespace

namespace detail {

int64_t enforced_memory_limit(Device device) {
  read_environment_once();
  const Environment& env = environment();
  if (env.bad.load(std::memory_order_relaxed)) [[unlikely]]
    throw Error(env.error, __FILE__, __LINE__);
  if (device.index < 0 || device.index >= kMaxIndex) return 0;
  return limits[static_cast<size_t>(device.type)][static_cast<size_t>(device.index)].load(std::memory_order_relaxed);
}

void register_device_memory(DeviceType type, int64_t (*bytes)(int index)) {
  device_memory[static_cast<size_t>(type)] = bytes;
}

}  // namespace detail

namespace memory {

int64_t device_memory_bytes(Device device) {
  if (device.is_cpu()) return physical_memory_bytes();
  int64_t (*bytes)(int) = device_memory[static_cast<size_t>(device.type)].load();
  EMBER_CHECK(bytes, "[memory::device_memory_bytes] no backend for ", device.str(), " (built without CUDA)");
  return bytes(device.index);
}

int64_t parse_bytes(std::string_view text, int64_t whole, const char* what) {
  const std::string s(text);
  char* end = nullptr;
  const double number = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  std::string_view unit = end ? std::string_view(end) : std::string_view();
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  struct Unit {
    const char* name;
    double bytes;
  };
  static constexpr Unit units[] = {{"", 1},      {"B", 1},        {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},
                                   {"TB", 1e12}, {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}};
  double scale = 0;
  if (unit == "%") {
    EMBER_CHECK(whole > 0, "[", what, "] '", text, "': a percentage of what? (this size takes bytes only)");
    scale = static_cast<double>(whole) / 100;
  }
  for (const Unit& u : units)
    if (unit == u.name) scale = u.bytes;
  EMBER_CHECK(std::isfinite(number) && scale > 0, "[", what, "] '", text,
              "' is not a size (a number of bytes, with B, KB, MB, GB, KiB, MiB, GiB or %)");
  const double bytes = std::floor(number * scale);
  EMBER_CHECK(bytes >= 1 && bytes < 0x1p62, "[", what, "] '", text, "' must be at least one byte and below 2^62");
  return static_cast<int64_t>(bytes);
}

void set_limit(Device device, int64_t bytes) {
  EMBER_CHECK(bytes > 0, "[memory::set_limit] the limit on ", device.str(), " must be positive, got ", bytes, " bytes");
  std::atomic<int64_t>& limit = slot(device, "memory::set_limit");
  Allocator& allocator = allocator_for(device);
  const MemoryStats now = allocator.stats();
  EMBER_CHECK(now.live_bytes <= bytes, "[memory::set_limit] ", format_bytes(bytes), " on ", device.str(),
              " is below the ", format_bytes(now.live_bytes), " its tensors hold now");
  settle_environment();
  limit.store(bytes);
  if (now.reserved_bytes > bytes) allocator.empty_cache();
}

void set_limit_fraction(Device device, double fraction) {
  EMBER_CHECK(fraction > 0 && fraction <= 1, "[memory::set_limit_fraction] the fraction of ", device.str(),
              "'s memory must be in (0, 1], got ", fraction);
  set_limit(device, static_cast<int64_t>(std::floor(fraction * static_cast<double>(device_memory_bytes(device)))));
}

void clear_limit(Device device) {
  std::atomic<int64_t>& limit = slot(device, "memory::clear_limit");
  settle_environment();
  limit.store(0);
}

std::optional<int64_t> limit(Device device) {
  std::atomic<int64_t>& slot_of_device = slot(device, "memory::limit");
  read_environment_once();
  const int64_t bytes = slot_of_device.load();
  if (bytes == 0) return std::nullopt;
  return bytes;
}

}  // namespace memory
}  // namespace ember
