#pragma once
// The tensor fingerprint (Note [Tensor fingerprints] in core/kernel_bodies/fingerprint.h): the
// signature and slot in the kernel table (Note [The kernel table] in core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

// x in any layout: fingerprint::finish of the sums of fingerprint::add_element over its elements
// (Note [Tensor fingerprints]); the same 64 bits on every device
using FingerprintFn = uint64_t(const Tensor& x);

inline Kernel<FingerprintFn> fingerprint{"fingerprint", Writes{}};

}  // namespace ember::kernels
