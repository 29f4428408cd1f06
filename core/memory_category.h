#pragma once
// Note [Memory by category]
// When a program meets the memory wall, the first question is what the memory holds: the model
// (parameters and buffers), its gradients, the optimizer's state, the tensors autograd saved for
// backward (and under which part of the model), or something else (the batch, activations a
// program still holds, temporaries of the op that asked). Each storage carries its category, and
// the device's allocator keeps live bytes per category beside its other statistics, so the
// counts are exact and sum to live_bytes (Note [Caching allocator and exact statistics]).
//
// A storage starts as Other and is tagged where its role is known: a module's register_parameter
// and to(), and an optimizer's constructor, tag parameters and buffers; the autograd engine tags
// a leaf's .grad; the optimizers tag their state as they make or load it (optim/state.h); a
// tensor saved for backward that is still Other becomes SavedForBackward, owned by the top-level
// module that ran the op (the child the outermost call called: "blocks.3", "tok_emb"). A storage
// keeps its category until it is freed, so a saved activation a program still holds after
// backward stays counted as saved. Tagging moves a storage's bytes between two counters under the
// allocator's lock.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace ember {

class Tensor;

enum class MemoryCategory : uint8_t { Other, Parameters, Gradients, OptimizerState, SavedForBackward };
inline constexpr size_t kNumMemoryCategories = 5;
const char* category_name(MemoryCategory category);  // "parameters", "saved for backward", ...

// A storage's category, and for SavedForBackward its owner (detail::intern_owner).
struct MemoryTag {
  MemoryCategory category = MemoryCategory::Other;
  int owner = -1;
};

namespace memory {

// Live bytes of one device by category (Note [Memory by category]).
struct LiveByCategory {
  std::array<int64_t, kNumMemoryCategories> bytes{};
  // The SavedForBackward bytes by the top-level module that saved them, most first; "(model)" for
  // ops the outermost module ran itself, "(outside modules)" for ops outside any module call.
  std::vector<std::pair<std::string, int64_t>> saved_by_module;

  int64_t operator[](MemoryCategory c) const { return bytes[static_cast<size_t>(c)]; }
  int64_t total() const;
  // "parameters 1.00 MiB, gradients 1.00 MiB, optimizer state 0 B, saved for backward 3.00 MiB
  // (blocks.1 2.00 MiB, blocks.0 1.00 MiB), other 12 B", at most `modules_shown` modules named
  std::string str(size_t modules_shown = 4) const;
};
LiveByCategory live_by_category(Device device = kCPU);

// Tags the storage of `t` (nothing for an undefined tensor).
void tag(const Tensor& t, MemoryCategory category);

}  // namespace memory

namespace detail {
// The owner of what is saved for backward now on this thread: nn registers the source (core
// cannot include nn; Note [Module paths]). -1: outside any module call.
void set_saved_owner_source(int (*source)());
// The id of an owner's name, made on first use; the name of an id (-1: "(outside modules)").
int intern_owner(const std::string& name);
std::string owner_name(int id);
// Tags `t` as saved for backward by the current owner, if it is still Other (SavedTensor).
void tag_saved(const Tensor& t);
}  // namespace detail

}  // namespace ember
