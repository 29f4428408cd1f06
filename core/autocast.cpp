// Autocast regions and the casting table (Note [Autocast] in core/autocast.h).
#include "core/autocast.h"

#include <cstring>
#include <unordered_map>

#include "core/autograd/grad_mode.h"
#include "core/check.h"

namespace ember {
namespace {

using State = AutocastSnapshot::Device;

// One per device type, per thread.
thread_local AutocastSnapshot current{{State{false, kBFloat16, true}, State{false, kFloat16, true}}};
thread_local int regions = 0;          // Autocast guards (and restores) alive on this thread
thread_local bool op_casting = false;  // an OpCast is active on this thread

// The cast cache: a leaf's TensorImpl -> (the leaf, kept alive so the key stays its own; its cast).
struct CachedCast {
  Tensor source, cast;
};
thread_local std::unordered_map<const TensorImpl*, CachedCast> cache;

// Every entry point indexes the per-device state here, so a DeviceType cast from a number past
// the enumerators is refused here (Note [Enums from callers] in core/device.h).
State& state(DeviceType device) {
  check_enum(device, DeviceType::CUDA, "autocast", "device type");
  return current.devices[static_cast<size_t>(device)];
}

// Note [Autocast's table]
// One row per op autocast knows: what it does with the op's inputs on each device type (Keep:
// nothing, the op computes in its inputs' dtype). The CPU column is PyTorch 2.15's CPU lists
// (tests/fixtures/autocast_cpu_dtypes.txt), the CUDA column its CUDA lists, for the ops ember has
// (autocast_cuda_dtypes.txt: first written by PyTorch 2.11 on an H200, now by 2.15 on fake CUDA
// tensors, which gave 2.11's file back unchanged: make_autocast_fixtures.py). They differ: on
// CUDA, the ops that lose accuracy in float16 (exp, log, rsqrt, pow, the sums, softmax, cumsum,
// layer_norm, vector_norm, cosine_similarity) compute in float32 too, reflection and replication
// padding do not, and binary_cross_entropy is refused, since a float16 probability near 0 or 1
// rounds to it.
using autocast::Policy;
struct OpPolicy {
  const char* op;
  Policy cpu, cuda;
};
constexpr OpPolicy kPolicies[] = {
    {"matmul", Policy::LowerPrecision, Policy::LowerPrecision},
    {"linear", Policy::LowerPrecision, Policy::LowerPrecision},
    // einsum is on CUDA's list only; on the CPU its products cast as matmuls (Note [einsum as matmuls])
    {"einsum", Policy::Keep, Policy::LowerPrecision},
    {"conv2d", Policy::LowerPrecision, Policy::LowerPrecision},
    {"scaled_dot_product_attention", Policy::LowerPrecision, Policy::LowerPrecision},
    {"cross_entropy", Policy::Float32, Policy::Float32},
    {"nll_loss", Policy::Float32, Policy::Float32},
    {"mse_loss", Policy::Float32, Policy::Float32},
    {"l1_loss", Policy::Float32, Policy::Float32},
    {"smooth_l1_loss", Policy::Float32, Policy::Float32},
    {"huber_loss", Policy::Float32, Policy::Float32},
    {"binary_cross_entropy", Policy::Float32, Policy::Refused},
    {"binary_cross_entropy_with_logits", Policy::Float32, Policy::Float32},
    {"reflection_pad", Policy::Float32, Policy::Keep},   // pad(..., PadMode::Reflect)
    {"replication_pad", Policy::Float32, Policy::Keep},  // pad(..., PadMode::Replicate)
    {"exp", Policy::Keep, Policy::Float32},
    {"log", Policy::Keep, Policy::Float32},
    {"rsqrt", Policy::Keep, Policy::Float32},
    {"pow", Policy::Keep, Policy::Float32},
    {"sum", Policy::Keep, Policy::Float32},
    {"softmax", Policy::Keep, Policy::Float32},
    {"log_softmax", Policy::Keep, Policy::Float32},
    {"cumsum", Policy::Keep, Policy::Float32},
    {"layer_norm", Policy::Keep, Policy::Float32},
    {"vector_norm", Policy::Keep, Policy::Float32},
    {"cosine_similarity", Policy::Keep, Policy::Float32},
};

void end_region() {
  if (--regions == 0) cache.clear();
}

}  // namespace

Autocast::Autocast(DeviceType device, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : device_(device), before_(state(device)) {
  const DType wanted = dtype.value_or(device == DeviceType::CPU ? kBFloat16 : kFloat16);
  check_dtype(wanted, "autocast");
  EMBER_CHECK(is_sixteen_bit(wanted), "[autocast] computes in bfloat16 or float16, got ", wanted);
  state(device) = {enabled, wanted, cache_enabled};
  ++regions;
}

Autocast::~Autocast() {
  state(device_) = before_;
  end_region();
}

AutocastSnapshot autocast_snapshot() { return current; }

AutocastSnapshot autocast_off() {
  AutocastSnapshot off = current;
  for (State& d : off.devices) d.enabled = false;
  return off;
}

AutocastRestore::AutocastRestore(const AutocastSnapshot& snapshot) : before_(current) {
  current = snapshot;
  ++regions;
}

AutocastRestore::~AutocastRestore() {
  current = before_;
  end_region();
}

bool is_autocast_enabled(DeviceType device) { return state(device).enabled; }
DType autocast_dtype(DeviceType device) { return state(device).dtype; }

namespace autocast {

std::optional<Policy> policy_of(const char* op, DeviceType device) {
  for (const OpPolicy& p : kPolicies)
    if (std::strcmp(p.op, op) == 0) return device == DeviceType::CPU ? p.cpu : p.cuda;
  return std::nullopt;
}

OpCast::OpCast(const char* op, const Tensor& any_input) {
  if (op_casting || !any_input.defined()) return;
  device_ = any_input.device().type;
  const State& s = state(device_);
  if (!s.enabled) return;
  const auto policy = policy_of(op, device_);
  EMBER_CHECK(policy.has_value(), "[autocast] ", op, " is not on the casting table (core/autocast.cpp)");
  EMBER_CHECK(*policy != Policy::Refused, "[", op, "] is refused under ", device_ == DeviceType::CPU ? "CPU" : "CUDA",
              " autocast: a ", s.dtype, " probability near 0 or 1 rounds to it, and the loss is then inf; "
              "compute the logits and call binary_cross_entropy_with_logits, which autocast runs in float32");
  if (*policy == Policy::Keep) return;
  dtype_ = *policy == Policy::LowerPrecision ? s.dtype : kFloat32;
  active_ = true;
  op_casting = true;
}

OpCast::~OpCast() {
  if (active_) op_casting = false;
}

Tensor OpCast::operator()(const Tensor& t) const {
  if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == kFloat64 || t.device().type != device_ ||
      t.dtype() == dtype_)
    return t;
  const bool cacheable = state(device_).cache_enabled && dtype_ != kFloat32 && t.dtype() == kFloat32 &&
                         t.is_leaf() && t.requires_grad() && is_grad_enabled();
  if (!cacheable) return t.to(dtype_);
  auto hit = cache.find(t.impl());
  if (hit != cache.end() && hit->second.cast.dtype() == dtype_) return hit->second.cast;
  Tensor cast = t.to(dtype_);
  cache[t.impl()] = {t, cast};
  return cast;
}

size_t cached_casts() { return cache.size(); }

}  // namespace autocast
}  // namespace ember
