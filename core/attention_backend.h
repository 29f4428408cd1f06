#pragma once
// Which implementation scaled_dot_product_attention runs (core/ops/attention.cpp), as PyTorch's
// torch.nn.attention.sdpa_kernel picks one: the math path composed of ember's ops, or the fused
// kernels that never store the [..., L, S] weights (Note [Fused attention] in
// core/ops/fused_attention.cpp).
//   Auto (the default): fused where its kernels take the call (the CPU, no attn_mask that
//     requires a gradient), else math. CUDA's kernel is new and runs only when forced (Note
//     [Fused attention on CUDA] in cuda/fused_attention.cu).
//   Math: always the math path (the reference, and the way to get the weights).
//   Fused: always fused; a call it cannot take is an ember::Error that says why.
// The environment variable EMBER_ATTENTION_BACKEND=auto|math|fused sets the starting choice; a bad
// value makes every attention call fail, naming it, until the program sets the backend itself.
#include "core/device.h"

namespace ember {

enum class AttentionBackend { Auto, Math, Fused };
void set_attention_backend(AttentionBackend backend);
AttentionBackend attention_backend();
const char* attention_backend_name(AttentionBackend backend);  // "auto", "math", "fused"
// Whether `device` has fused attention kernels in this build (the CPU does; CUDA where built with it).
bool has_fused_attention(Device device);
// Whether Auto runs the fused kernels on `device` (where the call suits them): the CPU's; CUDA's
// not yet (Note [Fused attention on CUDA] in cuda/fused_attention.cu).
bool auto_attention_is_fused(Device device);

// Sets the backend for a scope and restores the one before (PyTorch's `with sdpa_kernel(...)`).
class AttentionBackendGuard {
 public:
  explicit AttentionBackendGuard(AttentionBackend backend) : previous_(attention_backend()) {
    set_attention_backend(backend);
  }
  ~AttentionBackendGuard() { set_attention_backend(previous_); }
  AttentionBackendGuard(const AttentionBackendGuard&) = delete;
  AttentionBackendGuard& operator=(const AttentionBackendGuard&) = delete;

 private:
  AttentionBackend previous_;
};

}  // namespace ember
