#pragma once
// The vector instructions of ember's own CPU loops (Note [SIMD dispatch] in core/cpu/loops.h),
// set in core/cpu/backends.cpp. A header of its own, as the loops need it without core/ops.h.
namespace ember {

// By default the widest the CPU has: AVX-512 (F, VL, BW and DQ), else AVX2 with FMA, else the
// build's baseline (SSE2 on x86-64, the only level elsewhere). set_simd_level picks a narrower
// one (to compare them, or where 512-bit vectors slow the clock); a level the CPU lacks fails.
// EMBER_SIMD=baseline|avx2|avx512 sets the starting level. The libraries (OpenBLAS, oneDNN)
// choose their own instructions.
enum class SimdLevel { Baseline, AVX2, AVX512 };
void set_simd_level(SimdLevel level);
SimdLevel simd_level();
SimdLevel best_simd_level();  // this CPU's widest
const char* simd_level_name(SimdLevel level);  // "baseline", "avx2", "avx512"

}  // namespace ember
