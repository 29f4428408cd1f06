#pragma once
// What the machine has: the physical memory of the CPU, for checks that refuse a request no
// allocator could ever serve before asking for it (einsum's intermediates), rather than after the
// system has been asked for gigabytes.
#include <cstdint>

namespace ember::memory {

// The CPU's physical memory in bytes (sysconf); 0 where the system does not say.
int64_t physical_memory_bytes();

}  // namespace ember::memory
