// Which library runs a CPU float product: OpenBLAS or oneDNN (core/cpu_settings.h, Note [Two BLAS
// for one gemm] in core/cpu/blas.cpp). The choice starts from EMBER_GEMM_BACKEND (Note [Choices
// from the environment] in core/environment_choice.h), else oneDNN where it was built in, and can
// be set at run time.
#include "core/cpu/choices.h"

namespace ember {
namespace {

detail::Choice<GemmBackend>& gemm_choice() {
  static detail::Choice<GemmBackend> choice =
      cpu::library_choice<GemmBackend>("EMBER_GEMM_BACKEND", {"openblas", GemmBackend::OpenBLAS});
  return choice;
}

}  // namespace

void set_gemm_backend(GemmBackend backend) { cpu::set_library(gemm_choice(), backend, "set_gemm_backend"); }
GemmBackend gemm_backend() { return gemm_choice().get(); }
void cpu::check_gemm_environment() { gemm_choice().check(); }

}  // namespace ember
