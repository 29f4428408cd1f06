#pragma once
// Note [Memory limits]
// A limit caps the bytes a device's caching allocator holds: its live blocks and its cache, the
// reserved bytes of MemoryStats, which is what a card's capacity caps on a GPU. When a request
// needs a fresh block that would take the allocator past its limit, it first gives its cache back,
// as it does when the system refuses a block, and then, still over, throws an OutOfMemoryError
// (core/out_of_memory.h) that names the request, the limit and what is live. A request the cache
// serves never fails: it takes no new memory. The check costs nothing on that path and one
// relaxed load when a block is fresh (core/allocator.cpp).
//
// A limit makes the memory wall visible, and testable, on any machine. Without one, a CPU
// program that needs more than the machine has swaps or is killed, and a GPU program fails only
// when the whole card is full. PyTorch has torch.cuda.set_per_process_memory_fraction for CUDA
// and nothing for the CPU.
//
// EMBER_MEMORY_LIMIT sets limits when the program starts, a comma-separated list of DEVICE:SIZE
// with DEVICE as Device::str() spells it (cpu, cuda:0, cuda:1) and SIZE a number of bytes with
// an optional unit (B, KB, MB, GB as powers of 1000; KiB, MiB, GiB as powers of 1024), or a
// percentage of the device's memory:
//   EMBER_MEMORY_LIMIT=cpu:2GiB,cuda:0:10GiB,cuda:1:50%
// It is read at the first fresh block of any device. A bad value is an ember::Error naming the
// variable there and at every fresh block after it, until the program sets or clears a limit.
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/device.h"

namespace ember::memory {

// A limit of `bytes` (> 0) on `device`. Refused below the bytes that device's tensors hold now;
// the cache is released when it would keep the allocator over the new limit.
void set_limit(Device device, int64_t bytes);
// A limit of `fraction` (in (0, 1]) of the device's memory (device_memory_bytes).
void set_limit_fraction(Device device, double fraction);
void clear_limit(Device device);
// The limit on `device`, if one is set.
std::optional<int64_t> limit(Device device);

// What a limit fraction is of: the machine's physical memory for the CPU, the card's for CUDA.
int64_t device_memory_bytes(Device device);
// "2GiB", "1.5 GB", "123", "50%" (of `whole`): bytes, or an ember::Error naming `what`.
int64_t parse_bytes(std::string_view text, int64_t whole, const char* what);

}  // namespace ember::memory

namespace ember::detail {

// The limit core/allocator.cpp enforces on `device`, 0 for none (reads EMBER_MEMORY_LIMIT first).
int64_t enforced_memory_limit(Device device);
// A backend's total memory per device index (CUDA registers cudaMemGetInfo's total).
void register_device_memory(DeviceType type, int64_t (*bytes)(int index));

}  // namespace ember::detail
