#include "core/out_of_memory.h"

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "core/allocator.h"
#include "core/autograd/op_label.h"
#include "core/autograd/recompute.h"
#include "core/memory_phase.h"

namespace ember {
namespace {

std::atomic<std::string (*)()> module_path_source{nullptr};

struct Advice {
  std::mutex mutex;
  std::map<std::pair<int, int>, std::string> by_device;
};
Advice& advice() {
  static Advice* a = new Advice;  // never destroyed: an allocation may fail during exit
  return *a;
}
std::pair<int, int> key(Device device) { return {static_cast<int>(device.type), device.index}; }

std::string phase_now() {
  if (autograd::is_recomputing()) return memory::kRecomputePhase;
  if (const char* phase = memory::current_phase()) return phase;
  const autograd::OpLabel label = autograd::current_op_label();
  if (label.backward) return memory::kBackwardPhase;
  return label.op ? memory::kForwardPhase : "";
}

}  // namespace

namespace memory {

void set_out_of_memory_advice(Device device, std::string text) {
  Advice& a = advice();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (text.empty()) a.by_device.erase(key(device));
  else a.by_device[key(device)] = std::move(text);
}

std::string out_of_memory_advice(Device device) {
  Advice& a = advice();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.by_device.find(key(device));
  return it == a.by_device.end() ? "" : it->second;
}

}  // namespace memory

std::string request_site(const std::string& op, const std::string& module, const std::string& phase) {
  std::string details = phase;
  if (!module.empty()) details += detail::concat(details.empty() ? "" : ", ", "module '", module, "'");
  if (details.empty()) return op;
  return op.empty() ? "(" + details + ")" : op + " (" + details + ")";
}

namespace detail {
void set_module_path_source(std::string (*source)()) { module_path_source = source; }
}  // namespace detail

void OutOfMemoryError::describe_request(Facts& facts) {
  const char* op = autograd::current_op_label().op;
  facts.op = op ? op : "";
  std::string (*module_path)() = module_path_source.load();
  facts.module = module_path ? module_path() : "";
  facts.phase = phase_now();
}

std::string OutOfMemoryError::describe(const Facts& f) {
  using memory::format_bytes;
  // Where: "in matmul (backward, module 'blocks.3.mlp.fc1')", as much of it as is known.
  const std::string site = request_site(f.op, f.module, f.phase);
  const std::string where = site.empty() ? "" : (f.op.empty() ? " " : " in ") + site;
  const std::string held =
      detail::concat(format_bytes(f.live_bytes), " held by tensors, ", format_bytes(f.reserved_bytes),
                     " by the allocator with its cache given back");
  const std::string request = detail::concat(format_bytes(f.requested_bytes), " (", f.requested_bytes, " bytes)");
  const std::string what =
      f.limit_bytes > 0
          ? detail::concat(": a tensor of ", request, " does not fit under the limit of ", format_bytes(f.limit_bytes),
                           " (", held, "; the limit is memory::set_limit's or EMBER_MEMORY_LIMIT's)")
          : detail::concat(": the system refused a block for a tensor of ", request, " (", held, ")");
  std::string out =
      detail::concat("[allocator] out of memory on ", f.device.str(), where, what, "\n  live: ", f.held.str());
  if (!f.advice.empty()) out += "\n  " + f.advice;
  return out;
}

}  // namespace ember
