// Which library runs a CPU convolution: ember's im2col reference or oneDNN (core/cpu_settings.h).
// The choice starts from EMBER_CONV_BACKEND (Note [Choices from the environment] in
// core/environment_choice.h), else oneDNN where it was built in, and can be set at run time.
#include "core/check.h"
#include "core/cpu/choices.h"
#include "core/cpu_settings.h"
#include "core/environment_choice.h"

namespace ember {
namespace {

ConvBackend default_conv() { return has_onednn() ? ConvBackend::OneDNN : ConvBackend::Reference; }

detail::Choice<ConvBackend>& conv_choice() {
  static detail::Choice<ConvBackend> choice = detail::from_environment<ConvBackend>(
      "EMBER_CONV_BACKEND", default_conv(), {{"reference", ConvBackend::Reference}, {"onednn", ConvBackend::OneDNN}},
      [](ConvBackend b) { return cpu::onednn_unavailable(b == ConvBackend::OneDNN); });
  return choice;
}

}  // namespace

void set_conv_backend(ConvBackend backend) {
  check_enum(backend, ConvBackend::OneDNN, "set_conv_backend", "backend");
  cpu::check_available(cpu::onednn_unavailable(backend == ConvBackend::OneDNN), "set_conv_backend");
  conv_choice().set(backend);
}

ConvBackend conv_backend() { return conv_choice().get(); }

void cpu::check_conv_environment() { conv_choice().check(); }

}  // namespace ember
