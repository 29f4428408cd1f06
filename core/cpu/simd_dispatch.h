#pragma once
// Which vector instructions a CPU loop runs with: the CPU's features, and simd_dispatch.
#include "core/cpu_settings.h"

namespace ember::cpu {

// Note [SIMD dispatch]
// The build targets baseline x86-64 (SSE2), so one binary runs on every x86-64 machine, and GCC
// vectorises our loops 4 floats wide. Hot loops are compiled twice more: for AVX2 + FMA (8 floats
// wide, fused multiply-add) and for AVX-512 (16 floats wide; F, VL, BW and DQ). simd_dispatch(fn)
// runs fn through run_avx512 or run_avx2, copies compiled with gnu::target and gnu::flatten (which
// inlines everything fn calls, so the whole loop, lambdas and the vmath functions below included,
// is generated for those instructions), or plain fn, as simd_level() says: the CPU's widest
// unless set_simd_level or EMBER_SIMD chose a narrower one (core/cpu_settings.h); it returns
// what fn returns. Only per-row work goes through here; OpenMP regions stay outside, so the
// thread team is the same either way. The widest level pays where a loop computes more than it moves: on
// this project's AMD EPYC (Zen 5, whose vector units are 512 bits wide), going from AVX2 to
// AVX-512 made GELU, exp and a softmax over rows of 1000 markedly faster, while an add, which
// only moves memory, stayed as it was (bench_core; bench/RESULTS.md, "AVX-512 in ember's loops").
// What can differ between the copies: GCC contracts `a * b + c` into a fused multiply-add in the
// AVX2 and AVX-512 copies, which rounds once where the SSE2 copy rounds twice, so exp, gelu, an
// affine op, ... can differ in the last bit between levels (all stay within the bounds of Note
// [Vectorisable float math]). Sums and max/min have no multiplies and are bitwise the same at
// every level (Note [Lane reductions]), and so are fingerprints (integer sums);
// tests/test_simd_levels.cpp runs the kernels at every level the CPU has and compares.

#if defined(__x86_64__)
inline bool cpu_has_avx2_fma() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return yes;
}

inline bool cpu_has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }();
  return yes;
}

template <class Fn>
[[gnu::target("avx2,fma"), gnu::flatten]] auto run_avx2(const Fn& fn) {
  return fn();
}

template <class Fn>
[[gnu::target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"), gnu::flatten]] auto run_avx512(const Fn& fn) {
  return fn();
}

template <class Fn>
auto simd_dispatch(const Fn& fn) {
  switch (simd_level()) {
    case SimdLevel::AVX512: return run_avx512(fn);
    case SimdLevel::AVX2: return run_avx2(fn);
    case SimdLevel::Baseline: break;
  }
  return fn();
}
#else  // other architectures: the one portable build of fn
template <class Fn>
auto simd_dispatch(const Fn& fn) {
  return fn();
}
#endif

}  // namespace ember::cpu
