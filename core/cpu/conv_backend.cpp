// Which library runs a CPU convolution: ember's im2col reference or oneDNN (core/cpu_settings.h).
// The choice starts from EMBER_CONV_BACKEND (Note [Choices from the environment] in
// core/environment_choice.h), else oneDNN where it was built in, and can be set at run time.
#include "core/cpu/choices.h"

namespace ember {
namespace {

detail::Choice<ConvBackend>& conv_choice() {
  static detail::Choice<ConvBackend> choice =
      cpu::library_choice<ConvBackend>("EMBER_CONV_BACKEND", {"reference", ConvBackend::Reference});
  return choice;
}

}  // namespace

void set_conv_backend(ConvBackend backend) { cpu::set_library(conv_choice(), backend, "set_conv_backend"); }
ConvBackend conv_backend() { return conv_choice().get(); }
void cpu::check_conv_environment() { conv_choice().check(); }

}  // namespace ember
