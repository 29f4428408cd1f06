#pragma once
// The error a device's allocator throws when a request does not fit (Note [Memory limits] in
// core/memory_limit.h): under the device's limit, or in what the system would give. A subclass
// of ember::Error, so a program that catches Error catches it too; one that wants to react to
// the memory wall (a smaller batch, checkpointing) catches this and reads its facts: how much was
// asked and held, and where the request came from: the op, the module and the phase (a forward,
// a backward, the recompute of a checkpointed region, the optimizer's step, data loading), what
// the live bytes hold by category (Note [Memory by category] in core/memory_category.h), and what
// to do, where the program said (memory::set_out_of_memory_advice).
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/device.h"
#include "core/memory_category.h"

namespace ember {

class OutOfMemoryError : public Error {
 public:
  struct Facts {
    Device device;
    int64_t requested_bytes = 0;  // what the tensor asked for
    int64_t limit_bytes = 0;      // the device's limit; 0 when the system refused the block first
    int64_t live_bytes = 0;       // held by tensors when the request came
    int64_t reserved_bytes = 0;   // live plus the allocator's cache, after it gave the cache back
    std::string op;               // the op whose forward or backward asked; "" outside any op
    std::string module;           // the module being called ("blocks.3.mlp"); "" outside any call
    std::string phase;            // "forward", "backward", ... (core/memory_phase.h); "" if none
    memory::LiveByCategory held;  // live_bytes by category, when the request came
    std::string advice;           // memory::set_out_of_memory_advice's for the device; "" if none
  };
  OutOfMemoryError(Facts facts, const char* file, int line)
      : Error(describe(facts), file, line), facts_(std::move(facts)) {}
  const Facts& facts() const { return facts_; }

  // The op, module and phase of the request being made now on this thread.
  static void describe_request(Facts& facts);

 private:
  static std::string describe(const Facts& facts);
  Facts facts_;
};

// Where a request came from, as an OutOfMemoryError and the memory snapshot name it: "matmul
// (backward, module 'blocks.3.mlp')", as much of it as is known; "(data loading)" without an op.
std::string request_site(const std::string& op, const std::string& module, const std::string& phase);

namespace memory {
// What an OutOfMemoryError on `device` advises, from now on (a training program that planned its
// step says which checkpointing or batch would fit: utils/limit_plan.h); "" removes it.
void set_out_of_memory_advice(Device device, std::string advice);
std::string out_of_memory_advice(Device device);
}  // namespace memory

namespace detail {
// nn registers where the module path comes from (core cannot include nn): Note [Module paths].
void set_module_path_source(std::string (*source)());
}  // namespace detail

}  // namespace ember
