#pragma once
// Activation (gradient) checkpointing: trade compute for memory by dropping the activations a
// function saves for backward and recomputing them when backward needs them.
// See Note [Non-reentrant checkpointing] in utils/checkpoint.cpp and docs/checkpointing.md.
#include <functional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace ember::utils {

// The recompute did not reproduce the forward (a different number of saved tensors, a shape,
// dtype or device that changed, or different values).
class CheckpointError : public Error {
 public:
  using Error::Error;
};

// What a policy sees of one op of a checkpointed region (Note [Checkpoint policies] in
// utils/checkpoint.cpp; docs/checkpointing.md section 6).
struct TensorInfo {
  Shape shape;
  DType dtype = kFloat32;
  Device device;
  bool defined = true;  // false for an optional tensor argument left out
  int64_t nbytes() const;
};
struct OpInfo {
  std::string name;                // the op's name in core/ops ("matmul", "scaled_softmax", "gelu")
  std::vector<TensorInfo> inputs;  // its tensor arguments, in order
  TensorInfo output;
  int64_t index = 0;          // its position among the region's ops, from 0 (nested regions' ops count too)
  int64_t index_of_name = 0;  // its position among the region's ops of the same name, from 0
  std::string module_path;    // the module it runs in, "blocks.3.mlp.fc1" (Note [Module paths] in nn/module_path.h)
  // Whether keeping the output can skip the op in the recompute: it saved nothing but its
  // arguments and its output (not a mask or statistics of its own; Note [Selective checkpointing]).
  bool replayable = false;
  int64_t flops = 0;           // what recomputing it costs (utils::estimated_flops; 0 for a view)
  int64_t saved = 0;           // how many tensors it saved for backward
  bool saved_output = false;   // whether its output was one of them
};

// Keep the op's output from the forward and replay it, or recompute the op. A MUST beats a PREFER
// of an enclosing or enclosed region, and asks for an error where it cannot be honoured
// (Note [Decision strengths] in utils/checkpoint.cpp).
enum class CheckpointDecision { MustSave, PreferSave, MustRecompute, PreferRecompute };
bool is_save(CheckpointDecision d);
bool is_must(CheckpointDecision d);
std::ostream& operator<<(std::ostream& os, CheckpointDecision d);

namespace checkpoint_detail {
template <class F>
constexpr bool may_be_empty = std::is_pointer_v<F>;
template <class R, class... A>
constexpr bool may_be_empty<std::function<R(A...)>> = true;
}  // namespace checkpoint_detail

// Decides, per op of a checkpointed region, whether its output is kept or recomputed. Made from
// a callable taking const OpInfo& and returning a CheckpointDecision, or from one taking the op's
// name and returning bool (true: PreferSave, false: PreferRecompute).
class CheckpointPolicy {
 public:
  using Decide = std::function<CheckpointDecision(const OpInfo&)>;
  template <class F>
    requires std::is_invocable_r_v<CheckpointDecision, const F&, const OpInfo&>
  CheckpointPolicy(F decide) : decide_(std::move(decide)) {}  // NOLINT: a callable is a policy
  template <class F>
    requires(!std::is_invocable_v<const F&, const OpInfo&> && std::is_invocable_r_v<bool, const F&, const std::string&>)
  CheckpointPolicy(F keep) {  // NOLINT: a callable is a policy
    if constexpr (checkpoint_detail::may_be_empty<F>)
      if (!static_cast<bool>(keep)) return;  // an empty std::function stays an empty policy
    decide_ = [keep = std::move(keep)](const OpInfo& op) {
      return keep(op.name) ? CheckpointDecision::PreferSave : CheckpointDecision::PreferRecompute;
    };
  }
  CheckpointDecision operator()(const OpInfo& op) const { return decide_(op); }
  explicit operator bool() const { return static_cast<bool>(decide_); }

 private:
  Decide decide_;
};

// Ready-made policies. Each answers PreferSave for what it keeps and PreferRecompute for the rest.
CheckpointPolicy recompute_all();  // the default: keep nothing, recompute everything
CheckpointPolicy save_matmuls();   // keep matmul and conv2d outputs, recompute the cheap ops
// Keep the math path's attention weights: the outputs of scaled_softmax (scaled_dot_product_attention
// without a mask) and softmax (with one, and any other softmax of the region). The fused path
// (core/attention_backend.h) has no weights to keep: it saves O(L) per query row, its own
// log-sum-exp among them, so it is an op to recompute (Note [Selective checkpointing]).
CheckpointPolicy save_attention();
// Keep the k-th, 2k-th, ... op named `op` of each region (k = 1: every one).
CheckpointPolicy save_every(int64_t k, const std::string& op);
// Keep every op run inside a module whose path matches `pattern`, a dotted path where `*` stands
// for any characters within one name: "blocks.*.attn" matches blocks.0.attn and the modules inside
// it (blocks.0.attn.qkv), "blocks.*.attn*" also blocks.0.attn_norm.
CheckpointPolicy save_modules(const std::string& pattern);

struct CheckpointOptions {
  // Replay the generators' states in the recompute so Dropout draws the same masks.
  bool preserve_rng_state = true;
  // Check count, shape, dtype and device of every recomputed tensor against the forward's, and
  // with check_values its values too (Note [Checking the recompute] in
  // checkpoint_value_check.cpp).
  bool determinism_check = true;
  // The value part of the check: a 64-bit fingerprint of every saved tensor, compared exactly.
  // Costs one extra read of each saved tensor in the forward and in the recompute.
  bool check_values = true;
  // Also fingerprint every op's output in the forward, so that a difference names the first op
  // whose recomputed output differs (implies the value check).
  bool debug = false;
  CheckpointPolicy policy = recompute_all();
};

using MultiFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Runs fn(inputs) keeping only handles to what its ops save for backward. Gradients flow to
// the inputs and to every parameter fn uses, as without checkpointing. fn is kept and called
// again during backward: whatever it captures by reference must still be alive then.
std::vector<Tensor> checkpoint(const MultiFunction& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {});
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options = {});
Tensor checkpoint(nn::Module& module, const Tensor& input, const CheckpointOptions& options = {});

// True while a checkpointed function is being recomputed (modules with side effects, like
// BatchNorm's running statistics, skip them then).
bool is_recomputing();

// Counters for tests, demos and benchmarks (this thread).
struct CheckpointStats {
  int64_t forwards = 0;          // checkpointed forwards run
  int64_t recomputations = 0;    // times a checkpointed function was re-run in backward
  int64_t early_stops = 0;       // recomputations cut short once every tensor was back
  int64_t tensors_packed = 0;    // saved tensors replaced by handles in the forward
  int64_t ops_replayed = 0;      // ops a policy kept, replayed instead of recomputed
  int64_t values_compared = 0;   // recomputed tensors whose fingerprint was taken and compared
  int64_t fingerprints_taken = 0;  // tensors the value check read, forward and recompute
};
CheckpointStats& checkpoint_stats();

}  // namespace ember::utils
