#pragma once
// Note [The kernel table]
// Every computation that touches tensor memory goes through one of the kernels below. Each
// kernel has one slot per device type; core/cpu/*.cpp fill the CPU slots and cuda/*.cu fill the
// CUDA slots, both at start-up through static registrars. Ops (core/ops/*.cpp) never look at a
// device: they check arguments, allocate outputs and call `kernels::name[device](args...)`.
// An empty slot throws "[name] has no CUDA kernel (built without CUDA)". Each kernel also says
// which of its arguments it writes (Writes{...}): with that the table gives a kernel that has no
// bfloat16 or float16 path of its own those dtypes staged through float32 (Note [Sixteen-bit
// floats through float32] in core/through_float32.h), so every op takes them.
//
// Contracts shared by all kernels: outputs are allocated by the caller (contiguous, except that
// fill, copy, unary and binary also write through views for the in-place ops); inputs are on the
// output's device; shapes are already checked and broadcast (stride-0 views), so a kernel never
// has to report user errors.
#include <algorithm>
#include <array>
#include <atomic>
#include <initializer_list>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernel_bodies/host_device.h"
#include "core/tensor.h"

namespace ember::kernels {

// Note [A backend's first call]
// A backend may need to refuse work before its first kernel runs: the CPU backend, when an
// environment variable chose something it cannot run (Note [Choices from the environment] in
// core/cpu/backends.cpp). It registers a check for its device type; the table runs the check
// when a kernel of that type is looked up until the check passes once, on the caller's thread
// (so its ember::Error reaches the op's caller), and after that a lookup costs one relaxed load.
// A check that throws runs again at the next lookup, so every call fails until the program
// fixes the choice.
using DeviceCheck = void();
bool set_device_check(DeviceType type, DeviceCheck* check);
namespace detail {
inline std::atomic<bool> device_checked[kNumDeviceTypes];  // constant-initialised to false
void run_device_check(DeviceType type);                    // sets device_checked when it passes
}  // namespace detail

// Which arguments of a kernel it writes, by position: Writes{2} for unary's `out`. The table
// needs it for Note [Sixteen-bit floats through float32].
struct Writes {
  constexpr Writes(std::initializer_list<int> positions) {
    for (int p : positions) mask |= 1u << p;
  }
  uint32_t mask = 0;
};

// Which 16-bit float dtypes a kernel computes on itself; the others it is given staged.
enum class SixteenBit : uint8_t { ThroughFloat32 = 0, BFloat16 = 1, Float16 = 2, Native = 3 };
inline bool takes(SixteenBit native, DType dtype) {
  const auto bit = static_cast<uint8_t>(dtype == DType::BFloat16 ? SixteenBit::BFloat16 : SixteenBit::Float16);
  return (static_cast<uint8_t>(native) & bit) != 0;
}

namespace detail {
template <class R, class... Args>
R through_float32(R (*fn)(Args...), uint32_t writes, Args... args);
// The dtype of the first bfloat16 or float16 tensor among args; Float32 when there is none.
template <class... Args>
DType sixteen_bit_dtype(const Args&... args);
[[noreturn]] void no_sixteen_bit_kernel(const char* name, DType dtype);
}  // namespace detail

template <class Fn>
class Kernel;

template <class R, class... Args>
class Kernel<R(Args...)> {
 public:
  using Fn = R(Args...);
  constexpr Kernel(const char* name, Writes writes) : name_(name), writes_(writes.mask), stageable_(true) {}
  // A kernel declared without its Writes cannot be staged: a 16-bit tensor reaching it is an
  // error unless its slot is SixteenBit::Native.
  constexpr explicit Kernel(const char* name) : name_(name), writes_(0), stageable_(false) {}

  void set(DeviceType type, Fn* fn, SixteenBit native) {
    slots_[static_cast<int>(type)] = fn;
    native_[static_cast<int>(type)] = native;
  }
  bool has(DeviceType type) const { return slots_[static_cast<int>(type)] != nullptr; }

  // Calls fn with its 16-bit tensors staged through float32: for a kernel that takes a 16-bit
  // dtype natively only in some cases (Note [Sixteen-bit floats through float32]).
  R staged(Fn* fn, Args... args) const { return detail::through_float32<R, Args...>(fn, writes_, args...); }

  // The slot for `device`, as a callable that stages 16-bit float arguments when the kernel has
  // no path of its own for them.
  class Call {
   public:
    R operator()(Args... args) const {
      const SixteenBit native = kernel_.native_[type_];
      if (native != SixteenBit::Native) {
        const DType sixteen_bit = detail::sixteen_bit_dtype(args...);
        if (sixteen_bit != kFloat32 && !takes(native, sixteen_bit)) [[unlikely]] {
          if (!kernel_.stageable_) detail::no_sixteen_bit_kernel(kernel_.name_, sixteen_bit);
          return kernel_.staged(fn_, args...);
        }
      }
      return fn_(args...);
    }

   private:
    friend class Kernel;
    Call(const Kernel& kernel, int type, Fn* fn) : kernel_(kernel), type_(type), fn_(fn) {}
    const Kernel& kernel_;
    int type_;
    Fn* fn_;
  };

  Call operator[](Device device) const {
    const int type = static_cast<int>(device.type);
    if (!detail::device_checked[type].load(std::memory_order_relaxed)) [[unlikely]]
      detail::run_device_check(device.type);
    Fn* fn = slots_[type];
    if (!fn) [[unlikely]]
      missing(device);
    return Call(*this, type, fn);
  }

 private:
  [[noreturn]] void missing(Device device) const;

  const char* name_;
  uint32_t writes_;
  bool stageable_;
  std::array<Fn*, kNumDeviceTypes> slots_{};
  std::array<SixteenBit, kNumDeviceTypes> native_{};
};

// Whether any kernel was registered for `type`: tells "built without CUDA" from "this op has no
// CUDA kernel yet" in the error for an empty slot.
bool backend_registered(DeviceType type);
void note_registration(DeviceType type);

template <class R, class... Args>
void Kernel<R(Args...)>::missing(Device device) const {
  EMBER_FAIL("[", name_, "] has no ", device.is_cuda() ? "CUDA" : "CPU", " kernel",
             backend_registered(device.type) ? " yet" : device.is_cuda() ? " (built without CUDA)" : "");
}

// Registers `fn` into `kernel` for `type` during static initialisation:
//   static const bool registered = kernels::add_kernel(kernels::fill, DeviceType::CPU, &fill_cpu);
// A kernel that computes on bfloat16 or float16 itself says so (SixteenBit::BFloat16, ...).
template <class Fn>
bool add_kernel(Kernel<Fn>& kernel, DeviceType type, Fn* fn, SixteenBit native = SixteenBit::ThroughFloat32) {
  kernel.set(type, fn, native);
  note_registration(type);
  return true;
}

// UnaryOp and BinaryOp, the elementwise ops, are declared with their math in
// core/kernel_bodies/elementwise_math.h.

enum class ReduceOp { Sum, Mean, Max, Min };

enum class RandomKind { Uniform, Normal };

// out = value
using FillFn = void(const Tensor& out, double value);
// dst = src (same shape and device; any strides; converts dtype)
using CopyFn = void(const Tensor& src, const Tensor& dst);
// contiguous dst = contiguous src, across devices (registered by a device backend)
using TransferFn = void(const Tensor& src, const Tensor& dst);
// out = op(x, a, b); x has out's shape and dtype
using UnaryFn = void(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b);
// out = op(x, y); x and y have out's shape and one dtype; out is uint8 for comparisons
using BinaryFn = void(BinaryOp op, const Tensor& x, const Tensor& y, const Tensor& out);
// out = cond ? x : y; all of out's shape; cond is uint8
using WhereFn = void(const Tensor& cond, const Tensor& x, const Tensor& y, const Tensor& out);
// x, mask (uint8) and out contiguous, one shape: out = mask ? x * scale : 0 (dropout)
using MaskedScaleFn = void(const Tensor& x, const Tensor& mask, double scale, const Tensor& out);
// x contiguous viewed as [outer, k, inner]; out[outer, inner] = op over k
using ReduceFn = void(ReduceOp op, const Tensor& x, int64_t outer, int64_t k, int64_t inner,
                      const Tensor& out);
// like reduce, writing the int64 index of the maximum (first one on ties)
using ArgmaxFn = void(const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out);
// out[b] = a[b] @ c[b] over a batch of one level, a: [B, M, K], c: [B, K, N], or of two,
// a: [B1, B2, M, K], c: [B1, B2, K, N] (Note [Two batch levels] in core/ops/matmul.cpp); out is
// contiguous with a's batch dims and [M, N]. The last two dims of a and c are row-major or
// column-major (a transposed view); batch strides may be 0. accumulate: out += a @ c (out holds a
// bias, Note [A bias in the product]).
using MatmulFn = void(const Tensor& a, const Tensor& c, const Tensor& out, bool accumulate);

// How a BLAS reads the last two dims [rows, cols] of a matmul operand: row-major with leading
// dimension ld, or — a transposed view — column-major, passed as a transpose flag.
struct GemmLayout {
  bool transposed;
  int64_t ld;
};
inline GemmLayout gemm_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1), rs = t.stride(-2), cs = t.stride(-1);
  if (cs == 1 || cols == 1) return {false, std::max<int64_t>({rs, cols, 1})};
  return {true, std::max<int64_t>({cs, rows, 1})};  // rs == 1: column-major
}
// The batch of a matmul operand as two levels, outer x inner matrices, each level with its
// stride in elements: a 3-D operand is one outer level of 1.
struct GemmBatch {
  int64_t outer, inner, outer_stride, inner_stride;
  int64_t count() const { return outer * inner; }
  int64_t offset(int64_t i) const { return i / inner * outer_stride + i % inner * inner_stride; }
  // One level when the outer stride steps over whole inner groups (contiguous or broadcast).
  bool folds() const { return outer == 1 || outer_stride == inner * inner_stride; }
};
inline GemmBatch gemm_batch(const Tensor& t) {
  if (t.dim() == 4) return {t.size(0), t.size(1), t.stride(0), t.stride(1)};
  return {1, t.size(0), 0, t.stride(0)};
}
// What a softmax row is: softmax (or log_softmax) of scale * x over the row's visible columns.
// With causal_rows > 0 the rows are those of [causal_rows, cols] matrices, and row i of each
// (i = row % causal_rows) sees columns j <= i only, the lower triangle from the top-left corner as
// tril(ones(L, S)) keeps it; the others are masked: 0 in a softmax's output (-inf in a
// log_softmax's) and 0 in the gradient (Note [Scaled causal softmax] in core/ops/attention.cpp).
struct SoftmaxSpec {
  bool log = false;
  double scale = 1.0;
  int64_t causal_rows = 0;
  // A row whose visible values are all -inf gives the masked value everywhere (0 in a softmax)
  // instead of NaN: attention's queries that may attend to nothing (Note [Rows that attend to
  // nothing] in core/ops/attention.cpp). Its gradient is then 0 through the usual formula.
  bool empty_rows_masked = false;
  // The columns row r sees: a prefix of the row.
  EMBER_HOST_DEVICE int64_t visible(int64_t r, int64_t cols) const {
    if (causal_rows <= 0) return cols;
    const int64_t i = r % causal_rows + 1;
    return i < cols ? i : cols;
  }
};
// x contiguous [rows, cols]; out = the rows' softmax as `spec` says
using SoftmaxFn = void(const Tensor& x, const Tensor& out, const SoftmaxSpec& spec);
// y = what SoftmaxFn wrote for the same spec, g its gradient, both contiguous [rows, cols]; on
// each row's visible columns gx = scale * y * (g - sum(g * y)), for log_softmax
// gx = scale * (g - exp(y) * sum(g)); 0 on the masked ones
using SoftmaxBackwardFn = void(const Tensor& y, const Tensor& g, const Tensor& gx, const SoftmaxSpec& spec);
// logits contiguous [N, C], target int64 [N]; writes per-sample loss[N] and logsumexp[N].
// Samples whose target is ignore_index get loss 0. smoothing is label smoothing in [0, 1).
using CrossEntropyFwdFn = void(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                               double smoothing, const Tensor& loss, const Tensor& lse);
// grad_logits[n, c] = grad_loss[n] * (softmax[n, c] - target distribution[n, c])
using CrossEntropyBwdFn = void(const Tensor& logits, const Tensor& target, const Tensor& lse,
                               const Tensor& grad_loss, int64_t ignore_index, double smoothing,
                               const Tensor& grad_logits);
// target contiguous int64; safe (target's shape) = target, with 0 where it is ignore_index, so that
// safe indexes a class (nll_loss). A target outside [0, classes) that is not ignored is a user
// error: the CPU op rejects it before the call; the CUDA kernel records it (Note [Index errors
// found on the device] in cuda/bad_index.h) and writes 0.
using ClassTargetsFn = void(const Tensor& target, int64_t classes, int64_t ignore_index, const Tensor& safe);
// x contiguous viewed as [outer, k, inner]; out[outer, j, inner] = x[outer, index[j], inner]
using IndexSelectFn = void(const Tensor& x, const Tensor& index, int64_t outer, int64_t k,
                           int64_t inner, const Tensor& out);
// the adjoint: out[outer, index[j], inner] += src[outer, j, inner]; out already holds a value
using IndexAddFn = void(const Tensor& src, const Tensor& index, int64_t outer, int64_t k,
                        int64_t inner, const Tensor& out);
// x contiguous viewed as [outer, k, inner], index contiguous [outer, m, inner];
// out[o, j, i] = x[o, index[o, j, i], i]
using GatherFn = void(const Tensor& x, const Tensor& index, int64_t outer, int64_t k, int64_t inner,
                      const Tensor& out);
// the adjoint: out[o, index[o, j, i], i] += src[o, j, i]
using ScatterAddFn = void(const Tensor& src, const Tensor& index, int64_t outer, int64_t k,
                          int64_t inner, const Tensor& out);
// Philox stream (seed, offset): uniform in [a, b) or normal(mean a, std b)
using RandomFn = void(RandomKind kind, const Tensor& out, uint64_t seed, uint64_t offset, double a,
                      double b);

// Geometry of a 2-D convolution or pooling window over NCHW input.
struct Window2d {
  int64_t n, c, h, w;    // input
  int64_t kh, kw;        // window
  int64_t sh, sw;        // stride
  int64_t ph, pw;        // padding
  int64_t dh = 1, dw = 1;  // dilation (convolution only)
  int64_t oh, ow;        // output
};
// Convolution (cross-correlation) of x contiguous [n, c, h, w] with weight contiguous
// [oc, c*kh*kw]: out contiguous [n, oc, oh*ow], bias not included.
using Conv2dFwdFn = void(const Tensor& x, const Tensor& weight, const Window2d& g, const Tensor& out);
// Its adjoints, from grad contiguous [n, oc, oh*ow]: in x, grad_x contiguous [n, c, h, w], and in
// the weight, grad_weight contiguous [oc, c*kh*kw] summed over the batch; either may be undefined
// (not wanted). x is read for grad_weight only (contiguous then). One kernel for both, so that an implementation can share work between them
// (oneDNN reads grad once in its own layout for both: Note [Convolution through oneDNN]).
using Conv2dBwdFn = void(const Tensor& grad, const Tensor& x, const Tensor& weight, const Window2d& g,
                         const Tensor& grad_x, const Tensor& grad_weight);
// out [n, c, oh, ow] = window max; indices (int64, same shape) = flat h*w position of the max
using MaxPool2dFwdFn = void(const Tensor& x, const Window2d& g, const Tensor& out, const Tensor& indices);
// grad_x (zero-filled by the caller) [n, c, h, w] += grad_out at the recorded positions
using MaxPool2dBwdFn = void(const Tensor& grad_out, const Tensor& indices, const Window2d& g, const Tensor& grad_x);
using AvgPool2dFwdFn = void(const Tensor& x, const Window2d& g, bool count_include_pad, const Tensor& out);
// grad_x is written (not accumulated): every element is assigned
using AvgPool2dBwdFn = void(const Tensor& grad_out, const Window2d& g, bool count_include_pad, const Tensor& grad_x);
// adaptive average pooling: g.kh/kw/sh/sw/ph/pw are unused; windows come from h/oh and w/ow.
// The backward writes every element of grad_x, as avg_pool2d_backward does.
using AdaptiveAvgPool2dFwdFn = void(const Tensor& x, const Window2d& g, const Tensor& out);
using AdaptiveAvgPool2dBwdFn = void(const Tensor& grad_out, const Window2d& g, const Tensor& grad_x);
// x contiguous seen as [n, c, s]: per-channel mean and biased variance (float, [c])
using BatchNormStatsFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& var);
// out = (x - mean[c]) * invstd[c] * weight[c] + bias[c] (weight/bias may be undefined)
using BatchNormApplyFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& invstd,
                              const Tensor& weight, const Tensor& bias, const Tensor& out);
// Training-mode backward (batch statistics): writes grad_x and, where defined, grad_weight and
// grad_bias ([c]).
using BatchNormBackwardFn = void(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                                 const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                 const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias);
// The running statistics a training forward moves towards the batch's: running = (1 - momentum)
// * running + momentum * batch, the variance unbiased (count / (count - 1) times the biased one,
// count = n * s > 1), as PyTorch. mean and var undefined: no update.
struct BatchNormRunning {
  Tensor mean, var;
  double momentum = 0.0;
};
// Training-mode forward in one call (Note [Batch-norm forward slots] in core/ops/batch_norm.cpp): the
// batch statistics of x, mean and invstd = 1 / sqrt(biased var + eps) ([c], what the backward
// receives), out = (x - mean) * invstd * weight + bias, and the running update.
using BatchNormTrainFwdFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                                 const Tensor& bias, double eps, const BatchNormRunning& running, const Tensor& out,
                                 const Tensor& mean, const Tensor& invstd);
// Evaluation-mode forward: out = (x - running_mean) / sqrt(running_var + eps) * weight + bias.
using BatchNormEvalFwdFn = void(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                                const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                                const Tensor& out);
// The two forwards composed of batch_norm_stats, batch_norm_apply and ops, for any device: the CPU's
// slots, and the CUDA slots' path when cuDNN declines (core/ops/batch_norm.cpp).
void batch_norm_train_forward_by_parts(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                                       const Tensor& bias, double eps, const BatchNormRunning& running,
                                       const Tensor& out, const Tensor& mean, const Tensor& invstd);
void batch_norm_eval_forward_by_parts(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                                      const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                                      const Tensor& out);
// x contiguous [rows, cols], normalised over cols: out = (x - mean) * rstd * weight + bias, with
// weight/bias [cols] or undefined; writes the statistics mean[rows] and rstd[rows] =
// 1 / sqrt(biased variance + eps), in x's dtype (Note [Layer-norm statistics]).
using LayerNormFwdFn = void(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                            const Tensor& mean, const Tensor& rstd);
// Writes grad_x [rows, cols] and, where defined, grad_weight and grad_bias [cols] (Note
// [Layer-norm backward]).
using LayerNormBwdFn = void(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                            const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                            const Tensor& grad_bias);
// weight contiguous [num, dim], indices contiguous int64 [n]: out[j] = weight[indices[j]]. The op
// checks ids it can see on the host; an id outside [0, num) that reaches a kernel gives a NaN row
// (Note [Embedding ids on the device]).
using EmbeddingFwdFn = void(const Tensor& weight, const Tensor& indices, const Tensor& out);
// The adjoint: grad_weight [num, dim] is written (not accumulated): row r is the sum of the
// grad[j] whose id is r, added in j order, zero for ids that never occur (Note [Embedding backward]).
using EmbeddingBwdFn = void(const Tensor& grad, const Tensor& indices, const Tensor& grad_weight);

// x contiguous viewed as [outer, n, inner]: indices [outer, k, inner] (int64) are the positions
// of the first k elements of each row in sorted order (ascending, or descending), NaN counting as
// the largest value and ties kept in index order (Note [Sort order])
using SortFn = void(const Tensor& x, int64_t outer, int64_t n, int64_t inner, int64_t k, bool descending,
                    const Tensor& indices);
// x contiguous viewed as [outer, n, inner], out of x's dtype: the running sums along n, from the
// front or (reverse) from the back; floats add in double
using CumsumFn = void(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, const Tensor& out);

// x in any layout: fingerprint::finish of the sums of fingerprint::add_element over its elements
// (Note [Tensor fingerprints]); the same 64 bits on every device
using FingerprintFn = uint64_t(const Tensor& x);

inline Kernel<FillFn> fill{"fill", Writes{0}};
inline Kernel<CopyFn> copy{"copy", Writes{1}};
inline Kernel<TransferFn> transfer{"transfer", Writes{1}};
inline Kernel<UnaryFn> unary{"unary", Writes{2}};
inline Kernel<BinaryFn> binary{"binary", Writes{3}};
inline Kernel<WhereFn> where{"where", Writes{3}};
inline Kernel<MaskedScaleFn> masked_scale{"masked_scale", Writes{3}};
inline Kernel<ReduceFn> reduce{"reduce", Writes{5}};
inline Kernel<ArgmaxFn> argmax{"argmax", Writes{4}};
inline Kernel<MatmulFn> matmul{"matmul", Writes{2}};
inline Kernel<SoftmaxFn> softmax{"softmax", Writes{1}};
inline Kernel<SoftmaxBackwardFn> softmax_backward{"softmax_backward", Writes{2}};
inline Kernel<CrossEntropyFwdFn> cross_entropy_forward{"cross_entropy_forward", Writes{4, 5}};
inline Kernel<CrossEntropyBwdFn> cross_entropy_backward{"cross_entropy_backward", Writes{6}};
inline Kernel<ClassTargetsFn> class_targets{"class_targets", Writes{3}};
inline Kernel<IndexSelectFn> index_select{"index_select", Writes{5}};
inline Kernel<IndexAddFn> index_add{"index_add", Writes{5}};
inline Kernel<GatherFn> gather{"gather", Writes{5}};
inline Kernel<ScatterAddFn> scatter_add{"scatter_add", Writes{5}};
inline Kernel<RandomFn> random{"random", Writes{1}};
inline Kernel<Conv2dFwdFn> conv2d_forward{"conv2d_forward", Writes{3}};
inline Kernel<Conv2dBwdFn> conv2d_backward{"conv2d_backward", Writes{4, 5}};
inline Kernel<MaxPool2dFwdFn> max_pool2d_forward{"max_pool2d_forward", Writes{2, 3}};
inline Kernel<MaxPool2dBwdFn> max_pool2d_backward{"max_pool2d_backward", Writes{3}};
inline Kernel<AvgPool2dFwdFn> avg_pool2d_forward{"avg_pool2d_forward", Writes{3}};
inline Kernel<AvgPool2dBwdFn> avg_pool2d_backward{"avg_pool2d_backward", Writes{3}};
inline Kernel<AdaptiveAvgPool2dFwdFn> adaptive_avg_pool2d_forward{"adaptive_avg_pool2d_forward", Writes{2}};
inline Kernel<AdaptiveAvgPool2dBwdFn> adaptive_avg_pool2d_backward{"adaptive_avg_pool2d_backward", Writes{2}};
inline Kernel<BatchNormStatsFn> batch_norm_stats{"batch_norm_stats", Writes{4, 5}};
inline Kernel<BatchNormApplyFn> batch_norm_apply{"batch_norm_apply", Writes{8}};
inline Kernel<BatchNormBackwardFn> batch_norm_backward{"batch_norm_backward", Writes{8, 9, 10}};
inline Kernel<BatchNormTrainFwdFn> batch_norm_train_forward{"batch_norm_train_forward", Writes{7, 8, 9, 10}};
inline Kernel<BatchNormEvalFwdFn> batch_norm_eval_forward{"batch_norm_eval_forward", Writes{9}};
inline Kernel<LayerNormFwdFn> layer_norm_forward{"layer_norm_forward", Writes{4, 5, 6}};
inline Kernel<LayerNormBwdFn> layer_norm_backward{"layer_norm_backward", Writes{5, 6, 7}};
inline Kernel<EmbeddingFwdFn> embedding_forward{"embedding_forward", Writes{2}};
inline Kernel<EmbeddingBwdFn> embedding_backward{"embedding_backward", Writes{2}};
inline Kernel<SortFn> sort{"sort", Writes{6}};
inline Kernel<CumsumFn> cumsum{"cumsum", Writes{5}};
inline Kernel<FingerprintFn> fingerprint{"fingerprint", Writes{}};

}  // namespace ember::kernels

#include "core/through_float32.h"  // the definitions of detail::through_float32 and sixteen_bit_dtype
