// Which library runs a CPU convolution and a float product: ember's im2col reference or oneDNN
// for the one, OpenBLAS or oneDNN for the other (core/ops.h); and which vector instructions
// ember's own loops use (Note [SIMD dispatch] in core/cpu/simd_dispatch.h). Each choice starts from its
// environment variable, else oneDNN where it was built in (the CPU's widest level for the loops),
// and can be set at run time.
//
// Note [Choices from the environment]
// A variable is read once, on first use, and the first use can be inside an OpenMP loop:
// simd_dispatch asks for the level row by row, and a batch of small products asks for the gemm
// backend on each thread (Note [Small products side by side] in core/cpu/matmul.cpp). An
// exception there would end the process. So the variables are read without throwing: a bad value
// (none of the names, or a choice this build or CPU cannot run) leaves the default and an error
// message, which the first CPU kernel call reports as an ember::Error on the caller's thread
// (check_cpu_environment is the CPU's check of Note [A backend's first call] in core/kernel_table.h),
// and every call after it, until the program sets that choice itself.
#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "core/cpu/simd_dispatch.h"
#include "core/cpu_settings.h"
#include "core/kernels.h"

namespace ember {
namespace {

template <class T>
struct Choice {
  std::atomic<T> value;
  std::atomic<bool> bad_environment;
  std::string error;  // why the environment's value was refused

  T get() const { return value.load(std::memory_order_relaxed); }
  void set(T v) {
    value = v;
    bad_environment = false;
  }
};

// The choice `env` names, of `names`; `unavailable(v)` says why this build or CPU cannot run v,
// or nothing. `fallback` when the variable is unset or bad (see the Note).
template <class T>
Choice<T> from_environment(const char* env, T fallback, std::initializer_list<std::pair<const char*, T>> names,
                           std::string (*unavailable)(T)) {
  const char* set = std::getenv(env);
  if (set == nullptr) return {fallback, false, ""};
  const std::string_view value(set);
  std::string listed;
  size_t i = 0;
  for (const auto& [name, v] : names) {
    if (value == name) {
      const std::string why = unavailable(v);
      if (why.empty()) return {v, false, ""};
      return {fallback, true, detail::concat("[", env, "] ", value, ": ", why)};
    }
    listed += detail::concat(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", "'", name, "'");
    ++i;
  }
  return {fallback, true, detail::concat("[", env, "] must be ", listed, ", got '", value, "'")};
}

std::string onednn_unavailable(bool wants_onednn) {
  return wants_onednn && !has_onednn() ? "ember was built without oneDNN (EMBER_DNNL=OFF, or libdnnl-dev missing)"
                                       : "";
}

std::string cpu_lacks(SimdLevel level) {
  return level <= best_simd_level() ? "" : detail::concat("this CPU cannot run ", simd_level_name(level),
                                                          " (its widest is ", simd_level_name(best_simd_level()), ")");
}

ConvBackend default_conv() { return has_onednn() ? ConvBackend::OneDNN : ConvBackend::Reference; }
GemmBackend default_gemm() { return has_onednn() ? GemmBackend::OneDNN : GemmBackend::OpenBLAS; }

Choice<ConvBackend>& conv_choice() {
  static Choice<ConvBackend> choice = from_environment<ConvBackend>(
      "EMBER_CONV_BACKEND", default_conv(), {{"reference", ConvBackend::Reference}, {"onednn", ConvBackend::OneDNN}},
      [](ConvBackend b) { return onednn_unavailable(b == ConvBackend::OneDNN); });
  return choice;
}

Choice<GemmBackend>& gemm_choice() {
  static Choice<GemmBackend> choice = from_environment<GemmBackend>(
      "EMBER_GEMM_BACKEND", default_gemm(), {{"openblas", GemmBackend::OpenBLAS}, {"onednn", GemmBackend::OneDNN}},
      [](GemmBackend b) { return onednn_unavailable(b == GemmBackend::OneDNN); });
  return choice;
}

Choice<SimdLevel>& simd_choice() {
  static Choice<SimdLevel> choice = from_environment<SimdLevel>(
      "EMBER_SIMD", best_simd_level(),
      {{"baseline", SimdLevel::Baseline}, {"avx2", SimdLevel::AVX2}, {"avx512", SimdLevel::AVX512}}, &cpu_lacks);
  return choice;
}

// A setter's refusal, thrown on its caller's thread.
void check_available(const std::string& why, const char* setter) {
  EMBER_CHECK(why.empty(), "[", setter, "] ", why);
}

}  // namespace

#if EMBER_WITH_DNNL
bool has_onednn() { return true; }
#else
bool has_onednn() { return false; }
#endif

void set_conv_backend(ConvBackend backend) {
  check_enum(backend, ConvBackend::OneDNN, "set_conv_backend", "backend");
  check_available(onednn_unavailable(backend == ConvBackend::OneDNN), "set_conv_backend");
  conv_choice().set(backend);
}

ConvBackend conv_backend() { return conv_choice().get(); }

void set_gemm_backend(GemmBackend backend) {
  check_enum(backend, GemmBackend::OneDNN, "set_gemm_backend", "backend");
  check_available(onednn_unavailable(backend == GemmBackend::OneDNN), "set_gemm_backend");
  gemm_choice().set(backend);
}

GemmBackend gemm_backend() { return gemm_choice().get(); }

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
  check_available(cpu_lacks(level), "set_simd_level");
  simd_choice().set(level);
}

SimdLevel simd_level() { return simd_choice().get(); }

namespace {
void check_cpu_environment() {
  const auto check = [](const auto& choice) {
    if (choice.bad_environment.load(std::memory_order_relaxed)) [[unlikely]]
      throw Error(choice.error, __FILE__, __LINE__);
  };
  check(conv_choice());
  check(gemm_choice());
  check(simd_choice());
}

const bool registered = kernels::set_device_check(DeviceType::CPU, &check_cpu_environment);
}  // namespace

}  // namespace ember
