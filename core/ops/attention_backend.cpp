// The attention backend choice (core/attention_backend.h): read from EMBER_ATTENTION_BACKEND on
// first use, then whatever the program sets. Unlike the CPU backend's choices (Note [Choices from
// the environment] in core/cpu/backends.cpp) it is read by the op on its caller's thread, never
// inside an OpenMP loop, so a bad value can be reported by throwing where it is read.
#include "core/attention_backend.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/check.h"
#include "core/kernels/fused_attention.h"

namespace ember {
namespace {

struct Choice {
  std::atomic<AttentionBackend> value{AttentionBackend::Auto};
  std::atomic<bool> bad_environment{false};
  std::string environment;  // the refused value
};

Choice& choice() {
  static Choice c;
  static const bool read = [] {
    const char* set = std::getenv("EMBER_ATTENTION_BACKEND");
    if (set == nullptr) return true;
    const std::string_view value(set);
    if (value == "auto") c.value = AttentionBackend::Auto;
    else if (value == "math") c.value = AttentionBackend::Math;
    else if (value == "fused") c.value = AttentionBackend::Fused;
    else {
      c.bad_environment = true;
      c.environment = value;
    }
    return true;
  }();
  (void)read;
  return c;
}

}  // namespace

void set_attention_backend(AttentionBackend backend) {
  check_enum(backend, AttentionBackend::Fused, "set_attention_backend", "backend");
  Choice& c = choice();
  c.value = backend;
  c.bad_environment = false;
}

AttentionBackend attention_backend() {
  const Choice& c = choice();
  EMBER_CHECK(!c.bad_environment, "[EMBER_ATTENTION_BACKEND] must be 'auto', 'math' or 'fused', got '", c.environment,
              "'");
  return c.value;
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
