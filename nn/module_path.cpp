#include "nn/module_path.h"

#include <utility>

#include "core/memory_category.h"
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

// The owner of a tensor saved now: the outermost call's callee, or the outermost call itself.
int saved_owner() {
  if (calls.empty()) return -1;
  const size_t k = calls.size() > 1 ? 1 : 0;
  ModuleCall& call = calls[k];
  if (!call.owner) call.owner = ember::detail::intern_owner(k == 0 ? "(model)" : path_of(k));
  return *call.owner;
}

// OutOfMemoryError names the module a request came from, and memory by category the module that
// saved a tensor (core cannot include nn).
const bool registered_for_errors = (ember::detail::set_module_path_source(&current_module_path),
                                    ember::detail::set_saved_owner_source(&saved_owner), true);

}  // namespace

std::string current_module_path() { return calls.empty() ? "" : path_of(calls.size() - 1); }

ModuleCalls module_calls() { return calls; }

ModuleCallGuard::ModuleCallGuard(Module& module) { calls.push_back({&module, std::nullopt, std::nullopt}); }
ModuleCallGuard::~ModuleCallGuard() { calls.pop_back(); }

ModuleCallsRestore::ModuleCallsRestore(ModuleCalls restored) : previous_(std::exchange(calls, std::move(restored))) {}
ModuleCallsRestore::~ModuleCallsRestore() { calls = std::move(previous_); }

}  // namespace ember::nn
