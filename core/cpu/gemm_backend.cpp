// Which library runs a CPU float product: OpenBLAS or oneDNN (core/cpu_settings.h, Note [Two BLAS
// for one gemm] in core/cpu/blas.cpp). The choice starts from EMBER_GEMM_BACKEND (Note [Choices
// from the environment] in core/environment_choice.h), else oneDNN where it was built in, and can
// be set at run time.
#include "core/check.h"
#include "core/cpu/choices.h"
#include "core/cpu_settings.h"
#include "core/environment_choice.h"

namespace ember {
namespace {

GemmBackend default_gemm() { return has_onednn() ? GemmBackend::OneDNN : GemmBackend::OpenBLAS; }

detail::Choice<GemmBackend>& gemm_choice() {
  static detail::Choice<GemmBackend> choice = detail::from_environment<GemmBackend>(
      "EMBER_GEMM_BACKEND", default_gemm(), {{"openblas", GemmBackend::OpenBLAS}, {"onednn", GemmBackend::OneDNN}},
      [](GemmBackend b) { return cpu::onednn_unavailable(b == GemmBackend::OneDNN); });
  return choice;
}

}  // namespace

void set_gemm_backend(GemmBackend backend) {
  check_enum(backend, GemmBackend::OneDNN, "set_gemm_backend", "backend");
  cpu::check_available(cpu::onednn_unavailable(backend == GemmBackend::OneDNN), "set_gemm_backend");
  gemm_choice().set(backend);
}

GemmBackend gemm_backend() { return gemm_choice().get(); }

void cpu::check_gemm_environment() { gemm_choice().check(); }

}  // namespace ember
