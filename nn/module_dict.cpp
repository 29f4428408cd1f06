#include "nn/module_dict.h"

#include <algorithm>

namespace ember::nn {

namespace {
auto find_key(const std::vector<Container::Entry>& entries, const std::string& key) {
  return std::find_if(entries.begin(), entries.end(), [&](const Container::Entry& e) { return e.name == key; });
}
}  // namespace

bool ModuleDict::contains(const std::string& key) const { return find_key(owned(), key) != owned().end(); }

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const Entry& e : owned()) out.push_back(e.name);
  return out;
}

Module& ModuleDict::operator[](const std::string& key) const {
  auto it = find_key(owned(), key);
  if (it == owned().end()) {
    std::string known;
    for (const Entry& e : owned()) known += (known.empty() ? "" : ", ") + e.name;
    EMBER_FAIL("[", name(), "] no module under the key '", key, "' (keys: ", known.empty() ? "none" : known, ")");
  }
  return *it->module;
}

}  // namespace ember::nn
