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

State& state(DeviceType device) { return current.devices[static_cast<size_t>(device)]; }

// PyTorch 2.15's CPU lists, for the ops ember has (tests/fixtures/autocast_cpu_dtypes.txt).
struct OpPolicy {
  const char* op;
  autocast::Policy policy;
};
constexpr OpPolicy kPolicies[] = {
    {"matmul", autocast::Policy::LowerPrecision},
    {"linear", autocast::Policy::LowerPrecision},
    {"einsum", autocast::Policy::LowerPrecision},
    {"conv2d", autocast::Policy::LowerPrecision},
    {"scaled_dot_product_attention", autocast::Policy::LowerPrecision},
    {"cross_entropy", autocast::Policy::Float32},
    {"nll_loss", autocast::Policy::Float32},
    {"mse_loss", autocast::Policy::Float32},
    {"l1_loss", autocast::Policy::Float32},
    {"smooth_l1_loss", autocast::Policy::Float32},
    {"huber_loss", autocast::Policy::Float32},
    {"binary_cross_entropy", autocast::Policy::Float32},
    {"binary_cross_entropy_with_logits", autocast::Policy::Float32},
    {"reflection_pad", autocast::Policy::Float32},   // pad(..., PadMode::Reflect)
    {"replication_pad", autocast::Policy::Float32},  // pad(..., PadMode::Replicate)
};

void end_region() {
  if (--regions == 0) cache.clear();
}

}  // namespace

Autocast::Autocast(DeviceType device, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : device_(device), before_(state(device)) {
  const DType wanted = dtype.value_or(device == DeviceType::CPU ? kBFloat16 : kFloat16);
  EMBER_CHECK(is_sixteen_bit(wanted), "[autocast] computes in bfloat16 or float16, got ", wanted);
  EMBER_CHECK(device == DeviceType::CPU || !enabled,
              "[autocast] has CPU op lists only so far; CUDA's (issue 23) are not written yet");
  state(device) = {enabled, wanted, cache_enabled};
  ++regions;
}

Autocast::~Autocast() {
  state(device_) = before_;
  end_region();
}

AutocastSnapshot autocast_snapshot() { return current; }

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

std::optional<Policy> policy_of(const char* op) {
  for (const OpPolicy& p : kPolicies)
    if (std::strcmp(p.op, op) == 0) return p.policy;
  return std::nullopt;
}

OpCast::OpCast(const char* op, const Tensor& any_input) {
  if (op_casting || !any_input.defined()) return;
  device_ = any_input.device().type;
  const State& s = state(device_);
  if (!s.enabled) return;
  const auto policy = policy_of(op);
  EMBER_CHECK(policy.has_value(), "[autocast] ", op, " is not on the casting table (core/autocast.cpp)");
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
