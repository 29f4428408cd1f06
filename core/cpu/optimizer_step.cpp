// The CPU kernel of the fused optimizer step (Note [Multi-tensor optimizer updates] in
// core/optimizer_step.h): the rules of core/kernel_bodies/optimizer_updates.h over all the
// parameters of a call. The elements of the call are numbered one after the other, parameter
// after parameter, and cut into equal chunks; one OpenMP loop hands out the chunks, and a chunk
// that spans the end of one parameter and the start of the next runs a piece of each. Equal
// chunks keep the threads equally busy whatever the sizes of the parameters (a ResNet's BN
// vectors beside its 36864-element conv weights), and the thread team wakes once per call.
//
// The inner loop is one rule, instantiated for the call's options, over plain arrays: it
// vectorises (-fopt-info-vec lists every instantiation), and under simd_dispatch runs 8 floats
// wide on AVX2. This file is compiled with -ffp-contract=off (Note [Replaying the composed
// update's rounding]), so the AVX2 copy rounds as the SSE2 one does.
#include <algorithm>
#include <vector>

#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/kernel_bodies/optimizer_updates.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using optimizer_bodies::ParamEntry;

inline constexpr int64_t kChunk = 16384;  // elements per chunk: 64 KiB of float parameter

template <bool kFirstStep, class T, class Update>
void update_range(const Update& update, const ParamEntry<T, typename Update::PerParam>& e, int64_t begin,
                  int64_t end) {
  // A parameter, its grad and its state never overlap (the optimizer refuses a parameter given
  // twice), so the iterations are independent. Said so, GCC vectorises every rule; left to prove
  // it with run-time overlap checks, it gives up on those with three or more state tensors.
  // Clang takes the pragma as an order, and where it cannot obey (the fuzz build's -O1 under
  // sanitizers) it warns, which -Werror makes fatal; it gets no promise and decides alone.
#if !defined(__clang__)
#pragma omp simd
#endif
  for (int64_t i = begin; i < end; ++i) optimizer_bodies::update_element<kFirstStep>(update, e, i);
}

template <class T, class Update>
void run_update(const Update& update, const std::vector<FusedParam>& params) {
  const auto table = optimizer_bodies::make_table<T>(update, params);
  std::vector<int64_t> starts;  // starts[j]: the number of the first element of parameter j
  int64_t total = 0;
  for (const auto& e : table) {
    starts.push_back(total);
    total += e.numel;
  }
  const int64_t chunks = (total + kChunk - 1) / kChunk;
#pragma omp parallel for if (total > kParallelGrain) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(total, (c + 1) * kChunk);
    size_t j = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), c * kChunk) - starts.begin()) - 1;
    for (int64_t at = c * kChunk; at < end; at = starts[j] + table[j].numel, ++j) {
      const auto& e = table[j];
      const int64_t begin = at - starts[j], stop = std::min(end - starts[j], e.numel);
      simd_dispatch([&] {
        if constexpr (Update::kFirstStepDiffers) {
          if (e.first_step) return update_range<true>(update, e, begin, stop);
        }
        update_range<false>(update, e, begin, stop);
      });
    }
  }
}

void optimizer_step_cpu(const OptimizerRule& rule, const std::vector<FusedParam>& params) {
  optimizer_bodies::visit_update(rule, params.front().param.dtype(),
                                 [&]<class T>(const auto& update) { run_update<T>(update, params); });
}

const bool registered = kernels::add_kernel(kernels::optimizer_step, DeviceType::CPU, &optimizer_step_cpu);

}  // namespace
}  // namespace ember::cpu
