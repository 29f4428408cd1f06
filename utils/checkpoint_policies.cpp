// What a checkpoint policy sees and says (utils/checkpoint.h), and the ready-made policies. How
// the regions ask their policies and combine the answers is the mechanism's (Note [Checkpoint
// policies] and Note [Decision strengths] in utils/checkpoint.cpp).
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "utils/checkpoint.h"

namespace ember::utils {

int64_t TensorInfo::nbytes() const {
  if (!defined) return 0;
  return checked_mul(numel_of(shape, "TensorInfo"), static_cast<int64_t>(element_size(dtype)), "TensorInfo", shape);
}

bool is_save(CheckpointDecision d) {
  return d == CheckpointDecision::MustSave || d == CheckpointDecision::PreferSave;
}
bool is_must(CheckpointDecision d) {
  return d == CheckpointDecision::MustSave || d == CheckpointDecision::MustRecompute;
}

std::ostream& operator<<(std::ostream& os, CheckpointDecision d) {
  switch (d) {
    case CheckpointDecision::MustSave: return os << "MustSave";
    case CheckpointDecision::PreferSave: return os << "PreferSave";
    case CheckpointDecision::MustRecompute: return os << "MustRecompute";
    case CheckpointDecision::PreferRecompute: return os << "PreferRecompute";
  }
  return os << "CheckpointDecision(" << static_cast<int>(d) << ")";
}

namespace {

CheckpointPolicy prefer_saving(std::function<bool(const OpInfo&)> keep) {
  return [keep = std::move(keep)](const OpInfo& op) {
    return keep(op) ? CheckpointDecision::PreferSave : CheckpointDecision::PreferRecompute;
  };
}

// `*` matches any run of characters of `name`.
bool glob_match(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  if (pattern[0] == '*') {
    for (size_t skip = 0; skip <= name.size(); ++skip)
      if (glob_match(pattern.substr(1), name.substr(skip))) return true;
    return false;
  }
  return !name.empty() && pattern[0] == name[0] && glob_match(pattern.substr(1), name.substr(1));
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> names;
  while (true) {
    const size_t dot = path.find('.');
    names.push_back(path.substr(0, dot));
    if (dot == std::string_view::npos) return names;
    path.remove_prefix(dot + 1);
  }
}

}  // namespace

CheckpointPolicy recompute_all() {
  return prefer_saving([](const OpInfo&) { return false; });
}

CheckpointPolicy save_matmuls() {
  return prefer_saving([](const OpInfo& op) { return op.name == "matmul" || op.name == "conv2d"; });
}

CheckpointPolicy save_attention() {
  return prefer_saving([](const OpInfo& op) { return op.name == "scaled_softmax" || op.name == "softmax"; });
}

CheckpointPolicy save_every(int64_t k, const std::string& op) {
  EMBER_CHECK(k >= 1, "[save_every] k must be at least 1, got ", k, " (for op ", op, ")");
  EMBER_CHECK(!op.empty(), "[save_every] the op name is empty");
  return prefer_saving([k, op](const OpInfo& info) { return info.name == op && (info.index_of_name + 1) % k == 0; });
}

CheckpointPolicy save_modules(const std::string& pattern) {
  const std::vector<std::string_view> parts = split_path(pattern);
  for (std::string_view part : parts)
    EMBER_CHECK(!part.empty(), "[save_modules] the pattern '", pattern, "' has an empty name (a leading, trailing or "
                "doubled '.')");
  return prefer_saving([pattern](const OpInfo& op) {
    if (op.module_path.empty()) return false;  // the region's outermost module: not one of a pattern's
    const std::vector<std::string_view> want = split_path(pattern), path = split_path(op.module_path);
    if (want.size() > path.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
      if (!glob_match(want[i], path[i])) return false;
    return true;
  });
}

}  // namespace ember::utils
