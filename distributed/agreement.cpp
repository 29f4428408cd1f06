#include "distributed/agreement.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/ops.h"

namespace ember::distributed {

namespace {

// One setting per line, name and value separated by a tab (neither holds a newline; a name holds
// no tab).
std::string encode(const Settings& settings) {
  std::string text;
  for (const auto& [name, value] : settings) {
    EMBER_CHECK(name.find_first_of("\t\n") == std::string::npos && value.find('\n') == std::string::npos,
                "[check_ranks_agree] setting '", name, "' holds a tab or a newline");
    text += name + '\t' + value + '\n';
  }
  return text;
}

Settings decode(const std::string& text) {
  Settings settings;
  for (size_t start = 0; start < text.size();) {
    const size_t tab = text.find('\t', start), end = text.find('\n', start);
    settings.emplace_back(text.substr(start, tab - start), text.substr(tab + 1, end - tab - 1));
    start = end + 1;
  }
  return settings;
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::vector<std::string> allgather_text(ProcessGroup& group, const std::string& text) {
  // Gathered on the group's device (NCCL gathers CUDA tensors), read on the host: first the
  // lengths, then the texts padded to the longest.
  const TensorOptions on_device = TensorOptions(kInt64).with_device(group.device());
  const Tensor lengths =
      group.allgather(full({1}, static_cast<double>(text.size()), on_device)).to(kCPU).contiguous();
  int64_t longest = 0;
  for (int r = 0; r < group.size(); ++r) longest = std::max(longest, lengths.data<int64_t>()[r]);
  Tensor mine = zeros({longest}, TensorOptions(kUInt8));
  if (!text.empty()) std::memcpy(mine.raw_data(), text.data(), text.size());  // an empty tensor has no data
  const Tensor all = group.allgather(mine.to(group.device())).to(kCPU).contiguous();
  std::vector<std::string> texts;
  for (int r = 0; r < group.size(); ++r) {
    const char* first = static_cast<const char*>(all.raw_data()) + r * longest;
    texts.emplace_back(first, static_cast<size_t>(lengths.data<int64_t>()[r]));
  }
  return texts;
}

void check_ranks_agree(ProcessGroup& group, const Settings& settings, const std::string& context,
                       const std::string& advice) {
  std::vector<Settings> all;
  for (const std::string& text : allgather_text(group, encode(settings))) all.push_back(decode(text));
  size_t longest = 0;
  for (const Settings& s : all) longest = std::max(longest, s.size());
  // The entry at `i` as a rank sees it: its value, with the name when the ranks name different
  // settings there (or "nothing" past the end of a shorter list).
  auto entry = [&](int rank, size_t i, bool with_name) -> std::string {
    const Settings& s = all[static_cast<size_t>(rank)];
    if (i >= s.size()) return "nothing";
    return with_name ? s[i].first + " = " + s[i].second : s[i].second;
  };
  for (size_t i = 0; i < longest; ++i) {
    bool same_names = true, same = true;
    for (int r = 1; r < group.size(); ++r) {
      const bool both = i < all[0].size() && i < all[static_cast<size_t>(r)].size();
      same_names = same_names && both && all[static_cast<size_t>(r)][i].first == all[0][i].first;
      same = same && both && all[static_cast<size_t>(r)][i] == all[0][i];
    }
    if (same) continue;
    // The ranks grouped by what they have, in order of their first rank.
    std::vector<std::pair<std::string, std::vector<int>>> values;
    for (int r = 0; r < group.size(); ++r) {
      const std::string value = entry(r, i, !same_names);
      auto found = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == value; });
      if (found == values.end()) values.push_back({value, {r}});
      else found->second.push_back(r);
    }
    std::string differences;
    for (size_t v = 0; v < values.size(); ++v)
      differences += detail::concat(v == 0 ? "" : v + 1 == values.size() ? " but " : ", ", values[v].first, " on ",
                                    rank_list(values[v].second));
    EMBER_FAIL(context, " ", same_names ? all[0][i].first + " is " : "the ranks differ: ", differences, "; ", advice);
  }
}

}  // namespace ember::distributed
