// The attention backend choice (core/attention_backend.h): read from EMBER_ATTENTION_BACKEND on
// first use, as the CPU backend's choices are (Note [Choices from the environment] in
// core/environment_choice.h), then whatever the program sets. Unlike theirs, it is read by the op
// on its caller's thread, never inside an OpenMP loop, so a bad value is reported by throwing
// where it is read.
#include "core/attention_backend.h"

#include "core/check.h"
#include "core/environment_choice.h"
#include "core/kernels/fused_attention.h"

namespace ember {
namespace {

detail::Choice<AttentionBackend>& choice() {
  static detail::Choice<AttentionBackend> c = detail::from_environment<AttentionBackend>(
      "EMBER_ATTENTION_BACKEND", AttentionBackend::Auto,
      {{"auto", AttentionBackend::Auto}, {"math", AttentionBackend::Math}, {"fused", AttentionBackend::Fused}});
  return c;
}

}  // namespace

void set_attention_backend(AttentionBackend backend) {
  check_enum(backend, AttentionBackend::Fused, "set_attention_backend", "backend");
  choice().set(backend);
}

AttentionBackend attention_backend() {
  const detail::Choice<AttentionBackend>& c = choice();
  c.check();
  return c.get();
}

const char* attention_backend_name(AttentionBackend backend) {
  check_enum(backend, AttentionBackend::Fused, "attention_backend_name", "backend");
  switch (backend) {
    case AttentionBackend::Auto: return "auto";
    case AttentionBackend::Math: return "math";
    case AttentionBackend::Fused: return "fused";
  }
  return "";
}

bool has_fused_attention(Device device) { return kernels::fused_attention_forward.has(device.type); }

bool auto_attention_is_fused(Device device) { return device.is_cpu() && has_fused_attention(device); }

}  // namespace ember
