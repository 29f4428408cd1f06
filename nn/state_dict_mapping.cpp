// Renaming and dropping a checkpoint's keys (Note [Loading other libraries' checkpoints]).
#include "nn/state_dict_mapping.h"

#include <map>

namespace ember::nn {

KeyMap& KeyMap::rename_prefix(std::string from, std::string to) {
  rules_.push_back([from = std::move(from), to = std::move(to)](const std::string& key) -> std::optional<std::string> {
    return key.starts_with(from) ? to + key.substr(from.size()) : key;
  });
  return *this;
}

KeyMap& KeyMap::rename(std::function<std::string(const std::string&)> rename) {
  EMBER_CHECK(rename, "[KeyMap] rename needs a function, got an empty one");
  rules_.push_back([rename = std::move(rename)](const std::string& key) -> std::optional<std::string> {
    std::string renamed = rename(key);
    EMBER_CHECK(!renamed.empty(), "[KeyMap] rename turned the key '", key, "' into an empty name");
    return renamed;
  });
  return *this;
}

KeyMap& KeyMap::drop_prefix(std::string prefix) {
  EMBER_CHECK(!prefix.empty(), "[KeyMap] drop_prefix needs a prefix; an empty one would drop every key");
  return drop_if([prefix = std::move(prefix)](const std::string& key) { return key.starts_with(prefix); });
}

KeyMap& KeyMap::drop_if(std::function<bool(const std::string&)> drop) {
  EMBER_CHECK(drop, "[KeyMap] drop_if needs a predicate, got an empty one");
  rules_.push_back([drop = std::move(drop)](const std::string& key) -> std::optional<std::string> {
    if (drop(key)) return std::nullopt;
    return key;
  });
  return *this;
}

std::optional<std::string> KeyMap::map(const std::string& key) const {
  std::optional<std::string> name = key;
  for (const auto& rule : rules_) {
    name = rule(*name);
    if (!name) break;
  }
  return name;
}

StateDict KeyMap::apply(const StateDict& state) const {
  StateDict out;
  std::map<std::string, std::string> source_of;  // new name -> the key it came from
  for (const auto& [key, t] : state) {
    const std::optional<std::string> name = map(key);
    if (!name) continue;
    EMBER_CHECK(t.defined(), "[KeyMap] the checkpoint's tensor '", key, "' is undefined");
    const auto [it, inserted] = source_of.emplace(*name, key);
    EMBER_CHECK(inserted, "[KeyMap] the keys '", it->second, "' and '", key, "' both map to '", *name,
                "'; drop one of them or rename them apart");
    out.emplace(*name, t);
  }
  return out;
}

LoadResult load_state_dict(Module& module, const StateDict& state, const KeyMap& map, bool strict) {
  const StateDict mapped = map.apply(state);
  if (strict) {
    const StateDict own = module.state_dict();
    std::string unplaced;
    for (const auto& [key, t] : state) {
      const std::optional<std::string> name = map.map(key);
      if (name && !own.count(*name))
        unplaced += (unplaced.empty() ? "" : ", ") + key + (*name == key ? "" : " (as " + *name + ")");
    }
    EMBER_CHECK(unplaced.empty(), "[", module.name(), "] load_state_dict through a KeyMap failed: the map left keys "
                "with no place in the module: ", unplaced, "; drop them (drop_prefix, drop_if) or rename them");
  }
  return module.load_state_dict(mapped, strict);
}

}  // namespace ember::nn
