#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

// Note [Owning containers]
// Most modules refer to children that are their own members (Note [Modules]). A container —
// Sequential, ModuleList, and a future ModuleDict — instead creates its children on the heap and
// keeps them alive itself, so a model can hold a number of blocks decided at run time. Container
// is that common part: adopt() registers a child under a name and keeps its shared_ptr;
// subclasses decide the names ("0", "1", ... for a list) and how children are found again.
// A child is registered like any other, so named_parameters(), state_dict(), train(), to() and
// printing see it as they see a member ("blocks.0.attn.qkv.weight").
class Container : public Module {
 protected:
  Container() = default;
  Module& adopt(const std::string& name, std::shared_ptr<Module> child);
  const std::vector<std::shared_ptr<Module>>& owned() const { return owned_; }

 private:
  std::vector<std::shared_ptr<Module>> owned_;
};

}  // namespace ember::nn
