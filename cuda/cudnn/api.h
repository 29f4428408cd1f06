#pragma once
// cuDNN for convolutions and batch norm on CUDA, with ember's own kernels (cuda/conv.cu,
// cuda/batch_norm.cu) as the reference path.
//
// Note [cuDNN or ember's kernels]
// The kernel table keeps one CUDA slot per computation (Note [The kernel table]); the slots of
// conv2d_forward, conv2d_backward_input, conv2d_backward_weight, batch_norm_train_forward,
// batch_norm_eval_forward and batch_norm_backward first offer the call to cuDNN (the functions in
// namespace cudnn below) and run ember's kernels when cuDNN declines. cuDNN declines when
//   - the build has no cuDNN (CMake EMBER_CUDNN=OFF, or AUTO without cudnn.h: cuda/cudnn/off.cpp),
//   - the switch is off: the environment variable EMBER_CUDNN=0 (or "off"), read at the first
//     call, or set_cudnn_enabled(false), which overrides it for the rest of the process,
//   - libcudnn.so.9 cannot be loaded (Note [cuDNN loaded at run time] in cuda/cudnn/library.h),
//   - the call is outside what cuDNN takes (a tensor of 2^31 or more elements, or a batch norm
//     over a larger batch than cuDNN serves: cuda/cudnn/shapes.h), the dtype is not float32
//     (convolutions also take float64), or no deterministic FMA-only algorithm fits (Note
//     [Deterministic cuDNN algorithms] in cuda/cudnn/conv.cpp).
// Either path computes the same function to rounding, so a test can run both in one process and
// compare them (tests/test_cudnn.cpp). The batch-norm forwards are one slot per mode so that
// cuDNN's fused calls can take them whole (Note [Batch-norm forward slots] in core/ops/batch_norm.cpp).
#include <cstdint>
#include <string>

#include "core/kernels.h"

namespace ember::cuda {

// The value of EMBER_CUDNN (null when unset): true for unset, "", "1", "on", "true", "auto";
// false for "0", "off", "false" (any case); anything else is an ember::Error naming the variable.
bool parse_cudnn_switch(const char* value);

// Overrides EMBER_CUDNN for this process: false runs ember's kernels, true cuDNN where it can.
void set_cudnn_enabled(bool enabled);
// The switch: set_cudnn_enabled's last value, else EMBER_CUDNN's.
bool cudnn_requested();
// Sets the switch for a scope and then puts back what it was, e.g. for a test of ember's own kernels.
class CudnnSwitchGuard {
 public:
  explicit CudnnSwitchGuard(bool enabled);
  ~CudnnSwitchGuard();
  CudnnSwitchGuard(const CudnnSwitchGuard&) = delete;
  CudnnSwitchGuard& operator=(const CudnnSwitchGuard&) = delete;

 private:
  int before_;  // the override before the guard: -1 (none: EMBER_CUDNN decides), 0 or 1
};
// Whether convolutions and batch norm go to cuDNN now: requested, built with it,
// and libcudnn loaded (this loads it; no GPU is needed).
bool cudnn_active();
// One line saying which path runs and why, e.g. "cuDNN 9.19.0 (libcudnn.so.9)" or "ember's
// kernels: EMBER_CUDNN=0 or set_cudnn_enabled(false)".
std::string cudnn_status();
// How many kernel calls cuDNN has served in this process: tests and scripts/gpu-check see with it
// which path ran.
int64_t cudnn_calls();

namespace cudnn {

// Each returns true when cuDNN computed the slot's result (same contract as the slot's kernel in
// core/kernels/), false when the caller must run ember's kernel. Failures of cuDNN calls are
// ember::Errors naming the call.
bool conv2d_forward(const Tensor& x, const Tensor& weight, const kernels::Window2d& g, const Tensor& out);
bool conv2d_backward_input(const Tensor& grad, const Tensor& weight, const kernels::Window2d& g,
                           const Tensor& grad_x);
bool conv2d_backward_weight(const Tensor& grad, const Tensor& x, const kernels::Window2d& g,
                            const Tensor& grad_weight);
bool batch_norm_train_forward(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                              const Tensor& bias, double eps, const kernels::BatchNormRunning& running,
                              const Tensor& out, const Tensor& mean, const Tensor& invstd);
bool batch_norm_eval_forward(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                             const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                             const Tensor& out);
bool batch_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                         const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias);

// Counts one call served (for cudnn_calls()).
void note_call();

}  // namespace cudnn
}  // namespace ember::cuda
