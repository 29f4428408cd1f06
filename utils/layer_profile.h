#pragma once
// The measurements the checkpoint planner works from: one plain training step of a Sequential,
// forward and backward, measured module by module with the allocator's exact statistics.
// See Note [Profiling a step] in utils/layer_profile.cpp and Note [Checkpoint planning] in
// utils/planner.cpp.
#include <string>
#include <vector>

#include "nn/sequential.h"

namespace ember::utils {

// One module of the Sequential. Bytes are live bytes of the sample's device, relative to what was
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
};

// The arithmetic operations an op did, estimated from its tensors (Note [Profiling a step]): 2 M N K
// for a matmul (M N more with a bias), 2 per output element and weight element of its output
// channel for a convolution, none for a view of an argument, one per output element otherwise.
int64_t estimated_flops(const std::string& op, const std::vector<Tensor>& args, const Tensor& output);

// Runs one training step of seq on `sample` without checkpointing (training mode, grad on) and
// measures every module. Backward starts from a dense gradient of the output's shape, as any real
// loss sends (the loss's own memory is the caller's). The step leaves no trace: generator states,
// BatchNorm statistics and every parameter's .grad (and the sample's) are as they were; the
// device's peak statistic is reset.
std::vector<LayerProfile> profile_layers(nn::ModuleList& seq, const Tensor& sample);

}  // namespace ember::utils
