#pragma once
// What ember's oneDNN paths share (core/cpu/dnnl_conv.cpp, core/cpu/dnnl_matmul.cpp): the CPU
// engine, scratch memory from ember's allocator, and the cache of created primitives.
#if EMBER_WITH_DNNL
#include <algorithm>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::cpu::dnnl_common {

inline const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Scratch bytes from ember's allocator (so the memory statistics count them), and oneDNN memory
// over them.
struct Scratch {
  Tensor bytes;
  dnnl::memory view(const dnnl::memory::desc& desc) {
    bytes = empty({static_cast<int64_t>(desc.get_size())}, TensorOptions(kUInt8));
    return dnnl::memory(desc, cpu_engine(), bytes.raw_data());
  }
};

// Primitives are expensive to create (a JIT compile), so each path keeps the ones it made: at most
// kCapacity, the most recently used at the back. A null entry remembers that oneDNN rejected the
// key (create returned null or threw dnnl::error), so the caller's fallback runs without retrying.
// A key holds the thread count: a primitive splits its work for the count it was created under.
template <class Key, class Value, std::shared_ptr<const Value> (*Create)(const Key&), size_t kCapacity>
class PrimitiveCache {
 public:
  std::shared_ptr<const Value> get(const Key& key) {
    std::lock_guard lock(mutex_);
    const auto hit = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == key; });
    if (hit != entries_.end()) {
      std::rotate(hit, hit + 1, entries_.end());
      return entries_.back().second;
    }
    std::shared_ptr<const Value> value;
    try {
      value = Create(key);
    } catch (const dnnl::error&) {
      // no implementation for this case: the caller's fallback runs it
    }
    if (entries_.size() == kCapacity) entries_.erase(entries_.begin());
    entries_.emplace_back(key, value);
    return value;
  }

  size_t size() {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<Key, std::shared_ptr<const Value>>> entries_;
};

}  // namespace ember::cpu::dnnl_common

#endif
