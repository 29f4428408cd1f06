#include "examples/fortune_collections.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/check.h"

namespace ember::examples {

std::vector<std::string> read_fortune_entries(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "[read_fortune_entries] cannot read '", path,
              "' (install Debian's fortunes package, or pass the folder with --data)");
  std::vector<std::string> entries;
  std::string entry, line;
  const auto finish = [&] {
    if (entry.ends_with('\n')) entry.pop_back();
    if (entry.find_first_not_of(" \t\n") != std::string::npos) entries.push_back(entry);
    entry.clear();
  };
  while (std::getline(in, line)) {
    if (line == "%") finish();
    else entry += line + '\n';
  }
  finish();
  return entries;
}

namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

FortuneSplits split_fortune_collections(const std::string& dir, const std::vector<std::string>& collections) {
  EMBER_CHECK(collections.size() >= 2, "[split_fortune_collections] need at least two collections to tell apart, got ",
              collections.size());
  // Note [Splitting the fortunes]: each distinct text with the labels it occurs under, in file order.
  std::map<std::string, std::set<int64_t>> labels_of;
  std::vector<std::string> order;
  for (size_t c = 0; c < collections.size(); ++c) {
    const std::string path = (std::filesystem::path(dir) / collections[c]).string();
    const std::vector<std::string> entries = read_fortune_entries(path);
    EMBER_CHECK(!entries.empty(), "[split_fortune_collections] '", path, "' holds no fortunes");
    for (const std::string& text : entries) {
      auto [it, fresh] = labels_of.try_emplace(text);
      if (fresh) order.push_back(text);
      it->second.insert(static_cast<int64_t>(c));
    }
  }
  FortuneSplits splits;
  splits.collections = collections;
  for (const std::string& text : order) {
    const std::set<int64_t>& labels = labels_of.at(text);
    if (labels.size() != 1) continue;
    const uint64_t bucket = fnv1a(text) % 10;
    LabelledTexts& set = bucket == 0 ? splits.test : bucket == 1 ? splits.validation : splits.train;
    set.texts.push_back(text);
    set.labels.push_back(*labels.begin());
  }
  return splits;
}

}  // namespace ember::examples
