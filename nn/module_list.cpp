#include "nn/module_list.h"

namespace ember::nn {

Module& ModuleList::append(std::shared_ptr<Module> child) { return adopt(std::to_string(size()), std::move(child)); }

Module& ModuleList::operator[](size_t i) const {
  EMBER_CHECK(i < size(), "[", name(), "] index ", i, " is out of range for ", size(), " module(s)");
  return *owned()[i];
}

}  // namespace ember::nn
