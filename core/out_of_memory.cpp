#include "core/out_of_memory.h"

#include <atomic>

#include "core/allocator.h"
#include "core/autograd/op_label.h"
#include "core/autograd/recompute.h"
#include "core/memory_phase.h"

namespace ember {
namespace {

std::atomic<std::string (*)()> module_path_source{nullptr};

std::string phase_now() {
  if (autograd::is_recomputing()) return memory::kRecomputePhase;
  if (const char* phase = memory::current_phase()) return phase;
  const autograd::OpLabel label = autograd::current_op_label();
  if (label.backward) return memory::kBackwardPhase;
  return label.op ? memory::kForwardPhase : "";
}

}  // namespace

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
  std::string where = f.op.empty() ? "" : " in " + f.op;
  std::string details = f.phase;
  if (!f.module.empty()) details += detail::concat(details.empty() ? "" : ", ", "module '", f.module, "'");
  if (!details.empty()) where += " (" + details + ")";
  const std::string held =
      detail::concat(format_bytes(f.live_bytes), " held by tensors, ", format_bytes(f.reserved_bytes),
                     " by the allocator with its cache given back");
  const std::string request = detail::concat(format_bytes(f.requested_bytes), " (", f.requested_bytes, " bytes)");
  if (f.limit_bytes > 0)
    return detail::concat("[allocator] out of memory on ", f.device.str(), where, ": a tensor of ", request,
                          " does not fit under the limit of ", format_bytes(f.limit_bytes), " (", held,
                          "; the limit is memory::set_limit's or EMBER_MEMORY_LIMIT's)");
  return detail::concat("[allocator] out of memory on ", f.device.str(), where,
                        ": the system refused a block for a tensor of ", request, " (", held, ")");
}

}  // namespace ember
