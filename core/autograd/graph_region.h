#pragma once
// Note [Graph regions]
// A thread-local name for the part of the graph being recorded now. utils::checkpoint opens a
// region around the forward it checkpoints; every Node created inside stamps the innermost open
// region (Node::region), so autograd::to_dot can draw the checkpointed nodes as one box, including
// those that saved nothing (an add) and so have nothing to recompute. Each region gets an id of
// its own, so two checkpoints of the same block stay two boxes. Only the pictures read it.
#include <atomic>
#include <cstdint>

#include "core/scoped_value.h"

namespace ember::autograd {

struct GraphRegion {
  uint64_t id = 0;              // 0: outside every region
  const char* name = nullptr;  // a string literal
};

namespace detail {
inline thread_local GraphRegion current_region;
inline std::atomic<uint64_t> next_region_id{1};
}  // namespace detail

inline GraphRegion current_graph_region() { return detail::current_region; }

// Opens a new region for the guard's lifetime; the previous one is current again afterwards.
class GraphRegionGuard : ScopedValue<GraphRegion> {
 public:
  explicit GraphRegionGuard(const char* name)
      : ScopedValue(detail::current_region, {detail::next_region_id.fetch_add(1), name}) {}
};

}  // namespace ember::autograd
