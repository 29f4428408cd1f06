#include "core/memory_category.h"

#include <atomic>
#include <mutex>
#include <numeric>
#include <unordered_map>

#include "core/allocator.h"
#include "core/check.h"
#include "core/tensor.h"

namespace ember {
namespace {

std::atomic<int (*)()> saved_owner_source{nullptr};

struct Owners {
  std::mutex mutex;
  std::vector<std::string> names;
  std::unordered_map<std::string, int> ids;
};
Owners& owners() {
  static Owners* o = new Owners;  // never destroyed: storages may be freed during exit
  return *o;
}

}  // namespace

const char* category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::Other: return "other";
    case MemoryCategory::Parameters: return "parameters";
    case MemoryCategory::Gradients: return "gradients";
    case MemoryCategory::OptimizerState: return "optimizer state";
    case MemoryCategory::SavedForBackward: return "saved for backward";
  }
  return "?";
}

namespace memory {

int64_t LiveByCategory::total() const { return std::accumulate(bytes.begin(), bytes.end(), int64_t{0}); }

std::string LiveByCategory::str(size_t modules_shown) const {
  std::string out;
  for (size_t c = 0; c < kNumMemoryCategories; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    if (category == MemoryCategory::Other) continue;  // last, as what the rest leaves
    out += detail::concat(out.empty() ? "" : ", ", category_name(category), " ", format_bytes(bytes[c]));
    if (category != MemoryCategory::SavedForBackward || saved_by_module.empty()) continue;
    std::string modules;
    for (size_t i = 0; i < std::min(modules_shown, saved_by_module.size()); ++i)
      modules += detail::concat(i ? ", " : "", saved_by_module[i].first, " ", format_bytes(saved_by_module[i].second));
    if (saved_by_module.size() > modules_shown)
      modules += detail::concat(", ", saved_by_module.size() - modules_shown, " more");
    out += " (" + modules + ")";
  }
  return out + ", other " + format_bytes((*this)[MemoryCategory::Other]);
}

LiveByCategory live_by_category(Device device) { return allocator_for(device).live_by_category(); }

void tag(const Tensor& t, MemoryCategory category) {
  if (t.defined() && t.storage()) t.storage()->tag(category);
}

}  // namespace memory

namespace detail {

void set_saved_owner_source(int (*source)()) { saved_owner_source = source; }

int intern_owner(const std::string& name) {
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mutex);
  auto [it, made] = o.ids.try_emplace(name, static_cast<int>(o.names.size()));
  if (made) o.names.push_back(name);
  return it->second;
}

std::string owner_name(int id) {
  if (id < 0) return "(outside modules)";
  Owners& o = owners();
  std::lock_guard<std::mutex> lock(o.mutex);
  EMBER_CHECK(static_cast<size_t>(id) < o.names.size(), "[memory] no owner ", id);
  return o.names[static_cast<size_t>(id)];
}

void tag_saved(const Tensor& t) {
  if (!t.defined() || !t.storage()) return;
  int (*source)() = saved_owner_source.load(std::memory_order_relaxed);
  t.storage()->tag(MemoryCategory::SavedForBackward, source ? source() : -1, /*only_from_other=*/true);
}

}  // namespace detail
}  // namespace ember
