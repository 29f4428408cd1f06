// Which kernels run CPU convolutions: ember's im2col reference or oneDNN (core/ops.h).
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "core/ops.h"

namespace ember {
namespace {

// EMBER_CONV_BACKEND if set, else oneDNN where it was built in.
ConvBackend starting_backend() {
  const char* env = std::getenv("EMBER_CONV_BACKEND");
  if (env == nullptr) return has_onednn() ? ConvBackend::OneDNN : ConvBackend::Reference;
  const std::string_view value(env);
  if (value == "reference") return ConvBackend::Reference;
  EMBER_CHECK(value == "onednn", "[conv2d] EMBER_CONV_BACKEND must be 'reference' or 'onednn', got '", value, "'");
  EMBER_CHECK(has_onednn(), "[conv2d] EMBER_CONV_BACKEND=onednn, but ember was built without oneDNN (EMBER_DNNL)");
  return ConvBackend::OneDNN;
}

// Read once, on first use: a bad EMBER_CONV_BACKEND fails the first convolution (and every one
// after it: a static whose initialiser throws is initialised again on the next call).
std::atomic<ConvBackend>& current() {
  static std::atomic<ConvBackend> backend{starting_backend()};
  return backend;
}

}  // namespace

#if EMBER_WITH_DNNL
bool has_onednn() { return true; }
#else
bool has_onednn() { return false; }
#endif

void set_conv_backend(ConvBackend backend) {
  EMBER_CHECK(backend == ConvBackend::Reference || has_onednn(),
              "[set_conv_backend] ember was built without oneDNN (EMBER_DNNL=OFF, or libdnnl-dev missing)");
  current() = backend;
}

ConvBackend conv_backend() { return current(); }

}  // namespace ember
