#pragma once
// Note [Module paths]
// current_module_path() names the module whose call is running on this thread the way
// named_modules() and state_dict keys do ("blocks.3.mlp.fc1"), so that code below the modules
// (a checkpoint policy, Note [Checkpoint policies] in utils/checkpoint.cpp) can tell where an
// op runs. Module::call (Note [The call path]) pushes the module on a thread-local stack of the
// calls under way and pops it when the call ends; that is one pointer per call, and nothing more
// is done unless someone asks for a path.
//
// A path is relative to the outermost call on the stack (the model being called: "" is the
// model itself), and is worked out when asked, from the stack: each module's name is where its
// caller registered it. A model usually calls its children directly, found among the caller's
// children; a block held by a ModuleList is called by the model that holds the list, so the
// name ("blocks.3") is found by a walk of the caller's descendants (named_modules(), first name
// of a shared module). Each call's path is worked out once and kept with the call, so the ops
// of one call (and of the calls inside it) cost no more walks. A module that its caller never
// registered gets its type name in brackets ("(Linear)").
//
// The same stack says which top-level module saved a tensor for backward, for memory by
// category (Note [Memory by category] in core/memory_category.h): the path of the call the
// outermost one made ("blocks.3"), worked out once per call and kept with it.
//
// A checkpoint recomputes its function during backward, when the stack is that of backward: it
// snapshots the calls under way in its forward and puts them back for the recompute
// (ModuleCallsRestore), so the ops there see the forward's paths.
#include <optional>
#include <string>
#include <vector>

namespace ember::nn {

class Module;

// The path of the module being called now, "" for the outermost one or outside any call.
std::string current_module_path();

// One call under way.
struct ModuleCall {
  Module* module;
  std::optional<std::string> path;  // worked out when first asked
  std::optional<int> owner;         // for the outermost call and its callees: Note [Memory by category]
};
using ModuleCalls = std::vector<ModuleCall>;

// The calls under way on this thread, outermost first (a copy, for a later ModuleCallsRestore).
ModuleCalls module_calls();

// Makes `module` the one being called for the guard's lifetime (Module::call).
class ModuleCallGuard {
 public:
  explicit ModuleCallGuard(Module& module);
  ~ModuleCallGuard();
  ModuleCallGuard(const ModuleCallGuard&) = delete;
  ModuleCallGuard& operator=(const ModuleCallGuard&) = delete;
};

// Puts back the calls of a snapshot for the guard's lifetime.
class ModuleCallsRestore {
 public:
  explicit ModuleCallsRestore(ModuleCalls calls);
  ~ModuleCallsRestore();
  ModuleCallsRestore(const ModuleCallsRestore&) = delete;
  ModuleCallsRestore& operator=(const ModuleCallsRestore&) = delete;

 private:
  ModuleCalls previous_;
};

}  // namespace ember::nn
