#pragma once
// How the CPU kernels spread work over the OpenMP team: the grain below which a loop stays on one
// thread, and parallel_for.
#include <omp.h>

#include <cstdint>

namespace ember::cpu {

// Note [The parallel grain]
// A loop goes over the thread team only past kParallelGrain elements (rows times row length for
// the elementwise loops, an estimate of the work elsewhere). Below it, waking the team costs more
// than the threads save, and both are the machine's. On this project's 2-vCPU VM, with the
// threads asleep between regions (OMP_WAIT_POLICY=PASSIVE, Note [OpenMP wait policy]), an affine
// pass over 32768 floats took longer on two threads than on one, and two threads stayed slower
// up to 2^20 floats (bench/bench_parallel_grain.cpp): the second vCPU brings arithmetic, not
// memory bandwidth. Ops with more arithmetic per element (exp, erf, Philox, reductions) still
// gain from it, so the grain is a compromise, chosen by the training steps: 131072 instead of
// 32768 made the MLP's forward and training step at 2 threads faster (bench/RESULTS.md,
// "Products through oneDNN", its part on the parallel grain); one thread is unaffected.
inline constexpr int64_t kParallelGrain = 131072;

// Runs fn(i) for i in [0, n) over the OpenMP team when `work` (a rough element count) is large.
template <class Fn>
void parallel_for(int64_t n, int64_t work, Fn fn) {
#pragma omp parallel for if (work > kParallelGrain && n > 1) schedule(static)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

}  // namespace ember::cpu
