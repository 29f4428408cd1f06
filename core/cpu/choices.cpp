// What the CPU backend's choices share (core/cpu/choices.h): whether ember was built with oneDNN,
// the setters' refusals, and the CPU's check of Note [A backend's first call] in
// core/kernel_table.h, which reports a bad environment variable (Note [Choices from the
// environment] in core/environment_choice.h).
#include "core/cpu/choices.h"

#include "core/check.h"
#include "core/cpu_settings.h"
#include "core/kernel_table.h"

namespace ember {

#if EMBER_WITH_DNNL
bool has_onednn() { return true; }
#else
bool has_onednn() { return false; }
#endif

namespace cpu {

std::string onednn_unavailable(bool wants_onednn) {
  return wants_onednn && !has_onednn() ? "ember was built without oneDNN (EMBER_DNNL=OFF, or libdnnl-dev missing)"
                                       : "";
}

void check_available(const std::string& why, const char* setter) {
  EMBER_CHECK(why.empty(), "[", setter, "] ", why);
}

namespace {
void check_cpu_environment() {
  check_conv_environment();
  check_gemm_environment();
  check_simd_environment();
}

const bool registered = kernels::set_device_check(DeviceType::CPU, &check_cpu_environment);
}  // namespace

}  // namespace cpu
}  // namespace ember
