#pragma once
// Internal to activation checkpointing, not for programs (installed only because every utils/
// header is): the Frame of one checkpointed call and what it records, shared by the mechanism
// (utils/checkpoint.cpp, Note [Non-reentrant checkpointing]) and the value check
// (utils/checkpoint_value_check.cpp, Note [Checking the recompute]).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/autocast.h"
#include "core/autograd/saved_tensor.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/module_path.h"
#include "utils/checkpoint.h"
#include "utils/layer_profile.h"

// Throws a CheckpointError: the recompute did not reproduce the forward.
#define EMBER_CHECKPOINT_FAIL(...) \
  throw CheckpointError(::ember::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

namespace ember::utils::checkpoint_detail {

// An op of the forward, and what the policy kept of it.
struct OpRecord {
  std::string name;
  bool kept = false;
  Tensor output;  // detached
  bool output_requires_grad = false;
  std::vector<int> saves;       // per saved tensor: the argument it aliases, or -1 for the output
  std::vector<Tensor> pending;  // saved while the op runs, resolved into `saves` when it ends
  std::vector<size_t> pending_entries;  // their entries, when the value check is on
  ArgumentsBefore args;         // while the op runs
  uint64_t output_fingerprint = 0;  // debug mode
};

// One view of one storage, remembered without keeping the storage alive (a weak reference, so
// that memory freed and reused by another tensor cannot match), with the version its storage had
// then: is() says whether a tensor is that view still holding the same values (no in-place write
// since).
struct SameView {
  std::weak_ptr<Storage> storage;
  const void* data = nullptr;
  Shape shape, strides;
  DType dtype = kFloat32;
  uint64_t version = 0;

  static SameView of(const Tensor& t) {
    return {t.storage(), t.raw_data(), t.shape(), t.strides(), t.dtype(), t.version()};
  }
  bool is(const Tensor& t) const {
    return storage.lock() == t.storage() && data == t.raw_data() && shape == t.shape() && strides == t.strides() &&
           dtype == t.dtype() && version == t.version();
  }
};

// How the value check knows that a recomputed tensor holds the forward's values (Note [Saved
// tensors not recomputed]).
enum class KnownBy : uint8_t {
  fingerprint,  // the forward's fingerprint, compared with the recompute's
  made_before,  // a view of a storage made before the region: the recompute saves the same view
  kept_output,  // a view of an output the policy kept: the recompute replays it
};

// What a saved tensor looked like in the forward, and its recomputed value until unpacked.
struct Entry {
  Shape shape;
  DType dtype;
  Device device;
  std::string op;
  SameView saved;  // when the options check values: the view the forward saved,
  KnownBy known_by = KnownBy::fingerprint;
  uint64_t fingerprint = 0;  // and its fingerprint when known_by says so
  Tensor value;
  bool ready = false;
};

// Note [One fingerprint per saved view]
// Ops save the same view more than once: attention's weights are saved by the softmax (its
// output) and by the product with v (its input), and they are the largest tensor a block saves.
// The value check fingerprints the view once and reuses the result while it is the same view
// holding the same values (SameView). The last few views are remembered, enough for an op's
// saves and the next op's.
struct FingerprintMemo {
  static constexpr size_t kRemembered = 4;
  std::vector<std::pair<SameView, uint64_t>> seen;  // the most recent last

  uint64_t of(const Tensor& t) {
    for (const auto& [view, f] : seen)
      if (view.is(t)) return f;
    const uint64_t f = fingerprint(t);
    ++checkpoint_stats().fingerprints_taken;
    if (seen.size() == kRemembered) seen.erase(seen.begin());
    seen.emplace_back(SameView::of(t), f);
    return f;
  }
};

// One checkpointed call: what its forward recorded, and what its recompute fills in.
struct Frame {
  MultiFunction fn;
  CheckpointOptions options;
  std::vector<autograd::SavedTensor> inputs;
  std::vector<bool> input_requires_grad;
  std::vector<std::pair<Device, GeneratorState>> rng;
  AutocastSnapshot autocast;      // the forward's, which the recompute runs under (Note [Autocast])
  nn::ModuleCalls module_calls;  // the forward's, which the recompute runs under (Note [Module paths])
  std::vector<Entry> entries;
  std::vector<OpRecord> ops;
  bool kept_let_go = false;             // Note [Letting kept outputs go]
  int current_op = -1;                  // forward: the op being recorded
  const char* recomputing_op = nullptr;  // recompute: the op running now
  FingerprintMemo fingerprints;          // the value check's, forward and recompute
  uint64_t first_serial_inside = 0;      // forward: storages from this serial on were made inside
  std::unordered_set<const Storage*> kept_storages;  // forward: of the outputs the policy kept

  // The mechanism (utils/checkpoint.cpp).
  Tensor take(size_t index);
  void recompute();
  void let_go_of_kept_outputs();
  void fill(size_t& next, const Tensor& t);

  // The value check (utils/checkpoint_value_check.cpp).
  bool checks_values() const { return options.debug || (options.determinism_check && options.check_values); }
  void choose_value_check(Entry& e, const Tensor& t);
  void know_by_fingerprint(Entry& e);  // of the values it holds, the forward's
  // Checks recomputed tensor `index`, t, which is not the very view the forward saved.
  void check_value(Entry& e, size_t index, const Tensor& t);
  void compare_values(const Entry& e, size_t index, const Tensor& t);
};

}  // namespace ember::utils::checkpoint_detail
