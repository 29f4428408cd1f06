#pragma once
// Note [Loading other libraries' checkpoints]
// A checkpoint written by another library names its tensors its own way: Hugging Face's BERT puts
// "bert." before every key of the encoder and keeps a pooler and heads that a plain encoder has
// no place for; a GPT-2 checkpoint stores its attention masks ("h.0.attn.bias") next to the
// weights. A KeyMap says how to rename and drop keys: its rules run in the order they were added,
// each on the name the previous one gave, until one drops the key. apply() returns the state dict
// under the new names, the tensors themselves shared, and refuses what would load wrongly later:
// an undefined tensor (named by its key) and two keys that end at one name (both named, with the
// name; a map that merged them would load one and lose the other silently). load_state_dict(module,
// state, map) loads the result; in strict mode a key the map left without a place in the module
// is named with the checkpoint's key it came from, so the rule to add is plain. Dtypes convert on
// load (a float16 or bfloat16 checkpoint into float32 parameters), as Module::load_state_dict does.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

class KeyMap {
 public:
  // A key that starts with `from` gets `to` in its place ({"bert.", ""} strips BERT's prefix);
  // other keys pass unchanged.
  KeyMap& rename_prefix(std::string from, std::string to);
  // Every key becomes rename(key), which must not be empty.
  KeyMap& rename(std::function<std::string(const std::string&)> rename);
  // Drops the keys that start with `prefix` (not empty) or for which `drop` is true.
  KeyMap& drop_prefix(std::string prefix);
  KeyMap& drop_if(std::function<bool(const std::string&)> drop);

  // The name `key` ends with, or nullopt when a rule drops it.
  std::optional<std::string> map(const std::string& key) const;
  StateDict apply(const StateDict& state) const;

 private:
  // A rule gives the key's next name, or nullopt to drop it.
  std::vector<std::function<std::optional<std::string>(const std::string&)>> rules_;
};

// module.load_state_dict(map.apply(state), strict), with the strict errors naming the checkpoint's keys.
LoadResult load_state_dict(Module& module, const StateDict& state, const KeyMap& map, bool strict = true);

}  // namespace ember::nn
