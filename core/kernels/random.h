#pragma once
// Random numbers from Philox streams (Note [Philox4x32-10] in core/kernel_bodies/philox.h): the
// signature and slot in the kernel table (Note [The kernel table] in core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

enum class RandomKind { Uniform, Normal };
// Philox stream (seed, offset): uniform in [a, b) or normal(mean a, std b)
using RandomFn = void(RandomKind kind, const Tensor& out, uint64_t seed, uint64_t offset, double a,
                      double b);

inline Kernel<RandomFn> random{"random", Writes{1}};

}  // namespace ember::kernels
