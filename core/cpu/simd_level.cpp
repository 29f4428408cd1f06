// Which vector instructions ember's own CPU loops use (core/cpu_settings.h, Note [SIMD dispatch]
// in core/cpu/simd_dispatch.h). The choice starts from EMBER_SIMD (Note [Choices from the
// environment] in core/environment_choice.h), else the CPU's widest level, and can be set at run
// time.
#include <string>

#include "core/check.h"
#include "core/cpu/choices.h"
#include "core/cpu/simd_dispatch.h"
#include "core/cpu_settings.h"
#include "core/environment_choice.h"

namespace ember {
namespace {

std::string cpu_lacks(SimdLevel level) {
  return level <= best_simd_level() ? "" : detail::concat("this CPU cannot run ", simd_level_name(level),
                                                          " (its widest is ", simd_level_name(best_simd_level()), ")");
}

detail::Choice<SimdLevel>& simd_choice() {
  static detail::Choice<SimdLevel> choice = detail::from_environment<SimdLevel>(
      "EMBER_SIMD", best_simd_level(),
      {{"baseline", SimdLevel::Baseline}, {"avx2", SimdLevel::AVX2}, {"avx512", SimdLevel::AVX512}}, &cpu_lacks);
  return choice;
}

}  // namespace

SimdLevel best_simd_level() {
#if defined(__x86_64__)
  if (cpu::cpu_has_avx512()) return SimdLevel::AVX512;
  if (cpu::cpu_has_avx2_fma()) return SimdLevel::AVX2;
#endif
  return SimdLevel::Baseline;
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Baseline: return "baseline";
    case SimdLevel::AVX2: return "avx2";
    case SimdLevel::AVX512: return "avx512";
  }
  return "?";
}

void set_simd_level(SimdLevel level) {
  check_enum(level, SimdLevel::AVX512, "set_simd_level", "level");
  cpu::check_available(cpu_lacks(level), "set_simd_level");
  simd_choice().set(level);
}

SimdLevel simd_level() { return simd_choice().get(); }

void cpu::check_simd_environment() { simd_choice().check(); }

}  // namespace ember
