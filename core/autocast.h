#pragma once
// Automatic mixed precision: autocast regions and the per-op casting table (core/autocast.cpp).
//
// Note [Autocast]
// Inside an autocast region, the ops that gain from a 16-bit dtype (the products: matmul, linear,
// einsum, conv2d, attention) cast their floating inputs to it, the ops that lose accuracy in it
// (the losses; on the CPU reflection and replication padding; on CUDA also exp, log, pow, the
// sums, softmax, layer_norm and the norms) cast theirs to float32, and every other op computes in the dtype
// its inputs come in, so a ReLU after a bfloat16 product runs in bfloat16. The lists are
// PyTorch's for each device type, written once in `kPolicies` in core/autocast.cpp (Note
// [Autocast's table]) and checked against PyTorch's output dtype for every op
// (tests/test_autocast.cpp, and Cuda.AutocastDtypesArePyTorchs in tests/test_cuda.cpp).
//  - The state (enabled, dtype, cast cache on or off) is per device type and thread-local, like
//    grad mode; an Autocast guard sets it for its scope and puts back what it found, so regions
//    nest, and Autocast(device, dtype, false) turns autocast off inside one.
//  - An op casts through autocast::OpCast: while one op is casting, the ops it calls do not cast
//    again (linear's matmul, attention's softmax), as PyTorch runs an op's insides below its
//    autocast layer.
//  - A cast is eligible when the tensor is floating, not float64, and on the region's device
//    type; a float64 tensor keeps its dtype, as in PyTorch.
//  - The cast of a float32 leaf that requires grad (a weight) to the region's dtype is cached
//    until the outermost region ends, so a weight used by several ops converts once a step; its
//    gradient flows back through the one cast and arrives in float32.
//  - The backward engine runs with autocast off (autocast_off()), so a backward called inside a
//    region computes each op's gradient in the dtypes its forward chose, as PyTorch's does.
//  - Checkpointing records the state with the forward (AutocastSnapshot) and its recompute runs
//    under it (AutocastRestore), so a recompute in a backward outside any region still computes
//    in the forward's dtypes and gives the forward's bits.
#include <array>
#include <optional>

#include "core/tensor.h"

namespace ember {

// This thread's autocast state, every device type's.
struct AutocastSnapshot {
  struct Device {
    bool enabled;
    DType dtype;
    bool cache_enabled;
  };
  std::array<Device, kNumDeviceTypes> devices;
};

class Autocast {
 public:
  // dtype defaults to the device type's: bfloat16 on the CPU, float16 on CUDA.
  explicit Autocast(DeviceType device, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                    bool cache_enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DeviceType device_;
  AutocastSnapshot::Device before_;  // the device type's state the guard found
};

bool is_autocast_enabled(DeviceType device);
DType autocast_dtype(DeviceType device);
AutocastSnapshot autocast_snapshot();
// This thread's state with every device type's autocast off (the backward engine runs under it).
AutocastSnapshot autocast_off();

// Runs its scope under a snapshot's state, as a region of its own, and puts back what it found.
class AutocastRestore {
 public:
  explicit AutocastRestore(const AutocastSnapshot& snapshot);
  ~AutocastRestore();
  AutocastRestore(const AutocastRestore&) = delete;
  AutocastRestore& operator=(const AutocastRestore&) = delete;

 private:
  AutocastSnapshot before_;
};

namespace autocast {

// What an op on the table does with its inputs inside a region of a device type: nothing (Keep),
// cast them to the region's dtype or to float32, or refuse to run.
enum class Policy { Keep, LowerPrecision, Float32, Refused };

// The policy of `op` (its name in core/ops.h, or a mode-specific name such as "reflection_pad")
// on `device`, or none for ops that are not on the table.
std::optional<Policy> policy_of(const char* op, DeviceType device);

// Used at the top of an op on the table, with any floating input (its device picks the region):
//   if (autocast::OpCast cast{"matmul", a}) return matmul(cast(a), cast(b));
// True when the op casts: autocast is on for that device type and no other op is casting on this
// thread; for as long as it lives, the ops the cast call runs do not cast again.
class OpCast {
 public:
  OpCast(const char* op, const Tensor& any_input);
  ~OpCast();
  OpCast(const OpCast&) = delete;
  OpCast& operator=(const OpCast&) = delete;
  explicit operator bool() const { return active_; }
  // t in the op's dtype when eligible (Note [Autocast]), else t itself.
  Tensor operator()(const Tensor& t) const;

 private:
  bool active_ = false;
  DType dtype_ = kFloat32;
  DeviceType device_ = DeviceType::CPU;
};

// How many casts the cache holds on this thread (for tests).
size_t cached_casts();

}  // namespace autocast
}  // namespace ember
