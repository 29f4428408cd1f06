#pragma once
// What the CPU backend's three choices (core/cpu_settings.h) share. Each has a file that reads its
// environment variable (Note [Choices from the environment] in core/environment_choice.h) and
// holds its setter and getter: core/cpu/conv_backend.cpp, core/cpu/gemm_backend.cpp and
// core/cpu/simd_level.cpp.
#include <string>

namespace ember::cpu {

// Why this build cannot run a choice of oneDNN (for convolutions or products), or nothing.
std::string onednn_unavailable(bool wants_onednn);

// A setter's refusal, thrown on its caller's thread.
void check_available(const std::string& why, const char* setter);

// Each throws the error of its variable's bad value until the program sets that choice; the CPU's
// check of Note [A backend's first call] in core/kernel_table.h runs them (core/cpu/choices.cpp).
void check_conv_environment();
void check_gemm_environment();
void check_simd_environment();

}  // namespace ember::cpu
