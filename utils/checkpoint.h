#pragma once
// Activation (gradient) checkpointing: trade compute for memory by dropping the activations a
// function saves for backward and recomputing them when backward needs them.
// See Note [Non-reentrant checkpointing] in utils/checkpoint.cpp and docs/checkpointing.md.
#include <functional>
#include <string>
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

// Decides per op whether its output is kept in the forward (true) or recomputed (false).
using CheckpointPolicy = std::function<bool(const std::string& op)>;
CheckpointPolicy recompute_all();  // the default: keep nothing, recompute everything
CheckpointPolicy save_matmuls();   // keep matmul and conv2d outputs, recompute the cheap ops

struct CheckpointOptions {
  // Replay the generators' states in the recompute so Dropout draws the same masks.
  bool preserve_rng_state = true;
  // Check count, shape, dtype and device of every recomputed tensor against the forward's, and
  // with check_values its values too (Note [Checking the recompute] in checkpoint.cpp).
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
};
CheckpointStats& checkpoint_stats();

}  // namespace ember::utils
