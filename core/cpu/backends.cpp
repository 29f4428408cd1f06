// Which library runs a CPU convolution and a float product: ember's im2col reference or oneDNN
// for the one, OpenBLAS or oneDNN for the other (core/ops.h). Each choice starts from its
// environment variable, else oneDNN where it was built in, and can be set at run time.
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "core/check.h"
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

}  // namespace ember
