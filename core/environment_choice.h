#pragma once
// Note [Choices from the environment]
// Some settings start from an environment variable and can be set at run time: the CPU backend's
// libraries and SIMD level (core/cpu_settings.h, one file each in core/cpu/) and the attention
// backend (core/attention_backend.h). Each is a Choice that from_environment makes, on first use.
// A variable is read once, on first use, and the first use can be inside an OpenMP loop:
// simd_dispatch asks for the level row by row, and a batch of small products asks for the gemm
// backend on each thread (Note [Small products side by side] in core/cpu/matmul.cpp). An
// exception there would end the process. So the variables are read without throwing: a bad value
// (none of the names, or a choice this build or CPU cannot run) leaves the default and an error
// message, which the first CPU kernel call reports as an ember::Error on the caller's thread
// (check_cpu_environment in core/cpu/choices.cpp is the CPU's check of Note [A backend's first
// call] in core/kernel_table.h), and every call after it, until the program sets that choice
// itself. The attention backend is read by its op on the caller's thread, never inside a loop, so
// it reports its bad value where it reads it (core/ops/attention_backend.cpp).
#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "core/check.h"

namespace ember::detail {

template <class T>
struct Choice {
  std::atomic<T> value;
  std::atomic<bool> bad_environment;
  std::string error;  // why the environment's value was refused

  T get() const { return value.load(std::memory_order_relaxed); }
  void set(T v) {
    value = v;
    bad_environment = false;
  }
  // Throws the environment's refusal, if there was one, on the caller's thread (see the Note).
  void check() const {
    if (bad_environment.load(std::memory_order_relaxed)) [[unlikely]]
      throw Error(error, __FILE__, __LINE__);
  }
};

// The choice `env` names, of `names`; `unavailable(v)` says why this build or CPU cannot run v,
// or nothing (no `unavailable`: every choice can run). `fallback` when the variable is unset or
// bad (see the Note).
template <class T>
Choice<T> from_environment(const char* env, T fallback, std::initializer_list<std::pair<const char*, T>> names,
                           std::string (*unavailable)(T) = nullptr) {
  const char* set = std::getenv(env);
  if (set == nullptr) return {fallback, false, ""};
  const std::string_view value(set);
  std::string listed;
  size_t i = 0;
  for (const auto& [name, v] : names) {
    if (value == name) {
      const std::string why = unavailable ? unavailable(v) : "";
      if (why.empty()) return {v, false, ""};
      return {fallback, true, detail::concat("[", env, "] ", value, ": ", why)};
    }
    listed += detail::concat(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", "'", name, "'");
    ++i;
  }
  return {fallback, true, detail::concat("[", env, "] must be ", listed, ", got '", value, "'")};
}

}  // namespace ember::detail
