#pragma once
// The measurements the checkpoint planner works from: one plain training step of a Sequential,
// forward and backward, measured module by module with the allocator's exact statistics.
// See Note [Profiling a step] in utils/layer_profile.cpp and Note [Checkpoint planning] in
// utils/planner.cpp.
#include <string>
#include <vector>

#include "utils/layer_chain.h"

namespace ember::utils {

// One layer of the chain (a module of a Sequential). Bytes are live bytes of the sample's device, relative to what was
// live before the step.
struct LayerProfile {
  std::string name;
  int64_t live_after = 0;     // after the module's forward ran
  int64_t output_bytes = 0;   // of the module's output
  bool output_saved = false;  // whether the graph keeps the output for backward after the forward
  bool saves = false;         // whether the module saved any tensor for backward
  int64_t forward_peak = 0;   // the most live while the module's forward ran
  int64_t backward_peak = 0;  // the most live while backward was inside the module
  int64_t forward_flops = 0;  // work of the forward, estimated from shapes (the recompute's cost)
  double forward_ms = 0;      // measured once; reported, never used to choose a plan
  // live when backward first used a tensor the module saved (where a checkpoint of it recomputes);
  // backward_peak if it never did
  int64_t live_at_first_use = 0;
  // whether the module saved its own output (or a view of it) for backward, as a ReLU does: the
  // graph then holds the output until the module's own backward has used it
  bool saves_own_output = false;
};

// The work of an op in arithmetic operations, estimated from its tensors as a roofline (Note [Work
// of an op] in utils/layer_profile.cpp): its arithmetic (2 M N K for a matmul, M N more with a
// bias; 2 per output element and weight element of its output channel for a convolution;
// 2 L S (E + Ev) per attention matrix for fused attention, its two products; one per output
// element otherwise), or, where more, its bytes moved times a machine's flops per byte;
// none for a view of an argument, unless the op wrote its output over that argument (Note [Softmax
// over the scores] in core/ops/attention.cpp).
int64_t estimated_flops(const std::string& op, const std::vector<Tensor>& args, const Tensor& output,
                        bool written_over_argument = false);

// An op's arguments as an op observer sees them before the op runs, with their versions: an output
// that shares an argument's memory is a view of it, or was written over it if the argument's
// version moved meanwhile.
struct ArgumentsBefore {
  std::vector<Tensor> tensors;
  std::vector<uint64_t> versions;
  static ArgumentsBefore of(const std::vector<Tensor>& args);
  bool written_over(const Tensor& output) const;
};

// Runs one training step of the chain (a Sequential, a ModuleList, or links of functions: Note
// [Chains of layers] in utils/layer_chain.h) on `sample` without checkpointing (training mode, grad
// on) and measures every layer. Backward starts from a dense gradient of the output's shape, as any real
// loss sends (the loss's own memory is the caller's). The step leaves no trace: generator states,
// BatchNorm statistics and every parameter's .grad (and the sample's) are as they were; the
// device's peak statistic is reset.
std::vector<LayerProfile> profile_layers(const LayerChain& chain, const Tensor& sample);

}  // namespace ember::utils
