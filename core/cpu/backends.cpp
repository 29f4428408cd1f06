// Which library runs a CPU convolution and a float product: ember's im2col reference or oneDNN
// for the one, OpenBLAS or oneDNN for the other (core/ops.h). Each choice starts from its
// environment variable, else oneDNN where it was built in, and can be set at run time. Likewise
// the vector instructions of ember's own loops (Note [SIMD dispatch] in core/cpu/loops.h).
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/check.h"
#include "core/cpu/loops.h"
#include "core/ops.h"

namespace ember {
namespace {

// The starting choice: the environment variable `env` if set (`onednn`, or `other` for the
// non-oneDNN backend), else oneDNN where it was built in. `op` names who reads it in an error.
bool starts_on_onednn(const char* env, std::string_view other, const char* op) {
  const char* set = std::getenv(env);
  if (set == nullptr) return has_onednn();
  const std::string_view value(set);
  if (value == other) return false;
  EMBER_CHECK(value == "onednn", "[", op, "] ", env, " must be '", other, "' or 'onednn', got '", value, "'");
  EMBER_CHECK(has_onednn(), "[", op, "] ", env, "=onednn, but ember was built without oneDNN (EMBER_DNNL)");
  return true;
}

// Read once, on first use: a bad value fails the first convolution or product (and every one
// after it: a static whose initialiser throws is initialised again on the next call).
std::atomic<ConvBackend>& conv_choice() {
  static std::atomic<ConvBackend> backend{starts_on_onednn("EMBER_CONV_BACKEND", "reference", "conv2d")
                                              ? ConvBackend::OneDNN
                                              : ConvBackend::Reference};
  return backend;
}

std::atomic<GemmBackend>& gemm_choice() {
  static std::atomic<GemmBackend> backend{
      starts_on_onednn("EMBER_GEMM_BACKEND", "openblas", "matmul") ? GemmBackend::OneDNN : GemmBackend::OpenBLAS};
  return backend;
}

void check_cpu_has(SimdLevel level, const char* who) {
  EMBER_CHECK(level <= best_simd_level(), "[", who, "] this CPU cannot run ", simd_level_name(level),
              " (its widest is ", simd_level_name(best_simd_level()), ")");
}

// Note [Reading EMBER_SIMD]
// simd_dispatch asks for the level inside OpenMP loops, where an exception would end the process,
// and the first ask could be there. So the variable is read without throwing: a bad value (a
// name that is not a level, or a level this CPU lacks) leaves the CPU's widest level and an error
// message, which the first CPU kernel call reports, on the caller's thread (Kernel::operator[]
// calls check_cpu_environment), and every call after it until set_simd_level picks a level.
struct SimdChoice {
  std::atomic<SimdLevel> level;
  std::atomic<bool> bad_environment;
  std::string error;
};

SimdChoice& simd_choice() {
  static SimdChoice choice = [] {
    const char* set = std::getenv("EMBER_SIMD");
    if (set == nullptr) return SimdChoice{best_simd_level(), false, ""};
    const std::string_view value(set);
    for (SimdLevel l : {SimdLevel::Baseline, SimdLevel::AVX2, SimdLevel::AVX512})
      if (value == simd_level_name(l)) {
        if (l <= best_simd_level()) return SimdChoice{l, false, ""};
        return SimdChoice{best_simd_level(), true,
                          detail::concat("[EMBER_SIMD] this CPU cannot run ", value, " (its widest is ",
                                         simd_level_name(best_simd_level()), ")")};
      }
    return SimdChoice{best_simd_level(), true,
                      detail::concat("[EMBER_SIMD] must be 'baseline', 'avx2' or 'avx512', got '", value, "'")};
  }();
  return choice;
}

void check_built_with_onednn(bool wants_onednn, const char* setter) {
  EMBER_CHECK(!wants_onednn || has_onednn(), "[", setter,
              "] ember was built without oneDNN (EMBER_DNNL=OFF, or libdnnl-dev missing)");
}

}  // namespace

#if EMBER_WITH_DNNL
bool has_onednn() { return true; }
#else
bool has_onednn() { return false; }
#endif

void set_conv_backend(ConvBackend backend) {
  check_built_with_onednn(backend == ConvBackend::OneDNN, "set_conv_backend");
  conv_choice() = backend;
}

ConvBackend conv_backend() { return conv_choice(); }

void set_gemm_backend(GemmBackend backend) {
  check_built_with_onednn(backend == GemmBackend::OneDNN, "set_gemm_backend");
  gemm_choice() = backend;
}

GemmBackend gemm_backend() { return gemm_choice(); }

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
  check_cpu_has(level, "set_simd_level");
  SimdChoice& choice = simd_choice();
  choice.level = level;
  choice.bad_environment = false;
}

SimdLevel simd_level() { return simd_choice().level.load(std::memory_order_relaxed); }

namespace kernels {
void check_cpu_environment() {
  const SimdChoice& choice = simd_choice();
  if (choice.bad_environment.load(std::memory_order_relaxed)) [[unlikely]]
    throw Error(choice.error, __FILE__, __LINE__);
}
}  // namespace kernels

}  // namespace ember
