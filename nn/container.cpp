#include "nn/container.h"

namespace ember::nn {

Module& Container::adopt(const std::string& name, std::shared_ptr<Module> child) {
  EMBER_CHECK(child, "[", this->name(), "] cannot hold an empty module");
  add_child(name, child.get());
  owned_.push_back({name, std::move(child)});
  return *owned_.back().module;
}

}  // namespace ember::nn
