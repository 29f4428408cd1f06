#include "nn/module_list.h"

namespace ember::nn {

Module& ModuleList::operator[](size_t i) const {
  EMBER_CHECK(i < size(), "[", name(), "] index ", i, " is out of range for ", size(), " module(s)");
  return *owned()[i].module;
}

}  // namespace ember::nn
