#pragma once
// What the CPU backend's three choices (core/cpu_settings.h) share. Each has a file that reads its
// environment variable (Note [Choices from the environment] in core/environment_choice.h) and
// holds its setter and getter: core/cpu/conv_backend.cpp, core/cpu/gemm_backend.cpp and
// core/cpu/simd_level.cpp.
#include <string>
#include <utility>

#include "core/check.h"
#include "core/cpu_settings.h"
#include "core/environment_choice.h"

namespace ember::cpu {

// Why this build cannot run a choice of oneDNN (for convolutions or products), or nothing.
std::string onednn_unavailable(bool wants_onednn);

// A setter's refusal, thrown on its caller's thread.
void check_available(const std::string& why, const char* setter);

// The convolution and the gemm backend are each a library of ember's own build or oneDNN (the
// enum's value OneDNN, its last): oneDNN by default where this build has it, refused by name
// where it does not. `own` is the other library's name in the variable `env` and its value.
template <class Backend>
detail::Choice<Backend> library_choice(const char* env, std::pair<const char*, Backend> own) {
  return detail::from_environment<Backend>(env, has_onednn() ? Backend::OneDNN : own.second,
                                           {own, {"onednn", Backend::OneDNN}},
                                           [](Backend b) { return onednn_unavailable(b == Backend::OneDNN); });
}

// The setter of such a choice: an enum value in range that this build can run.
template <class Backend>
void set_library(detail::Choice<Backend>& choice, Backend backend, const char* setter) {
  check_enum(backend, Backend::OneDNN, setter, "backend");
  check_available(onednn_unavailable(backend == Backend::OneDNN), setter);
  choice.set(backend);
}

// Each throws the error of its variable's bad value until the program sets that choice; the CPU's
// check of Note [A backend's first call] in core/kernel_table.h runs them (core/cpu/choices.cpp).
void check_conv_environment();
void check_gemm_environment();
void check_simd_environment();

}  // namespace ember::cpu
