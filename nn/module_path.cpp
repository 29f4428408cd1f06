#include "nn/module_path.h"

#include <utility>

#include "core/out_of_memory.h"
#include "nn/module.h"

namespace ember::nn {

namespace {

thread_local ModuleCalls calls;

// Where `parent` registered `child`: among its children, else among its descendants.
std::string name_in(Module& parent, const Module* child) {
  for (const auto& [name, m] : parent.named_children())
    if (m == child) return name;
  for (const auto& [name, m] : parent.named_modules())
    if (m == child && !name.empty()) return name;
  std::string unregistered = child->name();  // (appending keeps GCC 12's -Wrestrict quiet)
  unregistered.insert(unregistered.begin(), '(');
  unregistered.push_back(')');
  return unregistered;
}

const std::string& path_of(size_t k) {
  ModuleCall& call = calls[k];
  if (!call.path) {
    if (k == 0) {
      call.path = "";
    } else {
      const std::string& parent = path_of(k - 1);
      const std::string name = name_in(*calls[k - 1].module, call.module);
      call.path = parent.empty() ? name : parent + "." + name;
    }
  }
  return *call.path;
}

// OutOfMemoryError names the module a request came from (core cannot include nn).
const bool registered_for_errors = (ember::detail::set_module_path_source(&current_module_path), true);

}  // namespace

std::string current_module_path() { return calls.empty() ? "" : path_of(calls.size() - 1); }

ModuleCalls module_calls() { return calls; }

ModuleCallGuard::ModuleCallGuard(Module& module) { calls.push_back({&module, std::nullopt}); }
ModuleCallGuard::~ModuleCallGuard() { calls.pop_back(); }

ModuleCallsRestore::ModuleCallsRestore(ModuleCalls restored) : previous_(std::exchange(calls, std::move(restored))) {}
ModuleCallsRestore::~ModuleCallsRestore() { calls = std::move(previous_); }

}  // namespace ember::nn
