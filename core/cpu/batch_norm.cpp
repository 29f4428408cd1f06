// CPU kernels of batch normalisation over x seen as [n, c, s] (s = spatial size). Sums run in
// lanes folded into double (Note [Lane reductions]) and the loops through simd_dispatch;
// each channel is independent, so channels are the parallel axis. The per-element math (apply,
// grad_x) is core/kernel_bodies/batch_norm.h, which the CUDA kernels run too. A bfloat16 or
// float16 x with float32 channel vectors computes in float32 as it is loaded (Stats below).
#include <cmath>

#include "core/cpu/lane_reductions.h"
#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/kernel_bodies/batch_norm.h"
#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernel_bodies/moments.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// Sum over channel ch of load(at), at = the flat offset of each of its n * s elements: lane sums
// over each sample's [s] slice (Note [Lane reductions]) added in sample order, in double.
template <class T, class Load>
double channel_sum(int64_t n, int64_t c, int64_t s, int64_t ch, const Load& load) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slice = (i * c + ch) * s;
    total += reduce_row<SumOp<T>>(s, [&](int64_t j) { return load(slice + j); });
  }
  return total;
}

// The channel vectors' element type for elements T: float32 for a 16-bit x (Note [Mixed-dtype
// batch norm] in core/ops/batch_norm.cpp), T itself otherwise. A 16-bit x widens to float32 as it
// is loaded and each result rounds once as it is stored, so the kernels give bitwise what staging
// through float32 gives, without its conversion passes over x, g and the outputs.
template <class T>
using Stats = math::Compute<T>;

// Whether the kernels take x with channel vectors of `stats`'s dtype themselves; a 16-bit x with
// 16-bit vectors (batch_norm without float32 ones) is staged through float32 instead.
bool takes_directly(const Tensor& x, const Tensor& stats) {
  return stats.dtype() == (is_sixteen_bit(x.dtype()) ? kFloat32 : x.dtype());
}

void batch_norm_stats_cpu(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& var) {
  if (!takes_directly(x, mean)) return kernels::batch_norm_stats.staged(&batch_norm_stats_cpu, x, n, c, s, mean, var);
  dispatch_floating_or_sixteen_bit(x.dtype(), "batch_norm", [&]<class T>() {
    using S = Stats<T>;
    const T* px = x.data<T>();
    S* pm = mean.data<S>();
    S* pv = var.data<S>();
    parallel_for(c, n * c * s, [&](int64_t ch) {
      simd_dispatch([&] {
        // Note [Shifted moments], shifted by the channel's first element.
        const double shift = n * s > 0 ? static_cast<double>(static_cast<S>(px[ch * s])) : 0.0;
        auto centred = [px, shift](int64_t at) { return math::centred(static_cast<S>(px[at]), shift); };
        const double sum = channel_sum<double>(n, c, s, ch, centred);
        const double sum_sq = channel_sum<double>(n, c, s, ch, [&](int64_t at) { return centred(at) * centred(at); });
        const math::Moments m = math::shifted_moments(shift, sum, sum_sq, n * s);
        pm[ch] = static_cast<S>(m.mean);
        pv[ch] = static_cast<S>(m.var);
      });
    });
  });
}

void batch_norm_apply_cpu(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& invstd,
                          const Tensor& weight, const Tensor& bias, const Tensor& out) {
  if (!takes_directly(x, mean))
    return kernels::batch_norm_apply.staged(&batch_norm_apply_cpu, x, n, c, s, mean, invstd, weight, bias, out);
  dispatch_floating_or_sixteen_bit(x.dtype(), "batch_norm", [&]<class T>() {
    using S = Stats<T>;
    const T* px = x.data<T>();
    const S *pm = mean.data<S>(), *pi = invstd.data<S>();
    const S* pw = weight.defined() ? weight.data<S>() : nullptr;
    const S* pb = bias.defined() ? bias.data<S>() : nullptr;
    T* po = out.data<T>();
    parallel_for(n * c, n * c * s, [&](int64_t r) {
      const batch_norm_bodies::Affine<S> affine = batch_norm_bodies::affine(pm, pi, pw, pb, r % c);
      const T* in = px + r * s;
      T* o = po + r * s;
      for (int64_t j = 0; j < s; ++j) o[j] = static_cast<T>(batch_norm_bodies::apply(static_cast<S>(in[j]), affine));
    });
  });
}

// Note [Batch-norm backward]
// With xhat = (x - mean) * invstd over M = n * s values of a channel, and y = w * xhat + b:
//   dL/db = sum(g),  dL/dw = sum(g * xhat),
//   dL/dx = w * invstd / M * (M * g - sum(g) - xhat * sum(g * xhat)).
// The two sums are the only cross-element terms, so two vectorised passes compute them and a
// third writes dL/dx: cheaper than differentiating the composition of mean, var and normalise op
// by op.
void batch_norm_backward_cpu(const Tensor& grad_out, const Tensor& x, int64_t n, int64_t c, int64_t s,
                             const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& grad_x,
                             const Tensor& grad_weight, const Tensor& grad_bias) {
  if (!takes_directly(x, mean) || grad_out.dtype() != x.dtype())
    return kernels::batch_norm_backward.staged(&batch_norm_backward_cpu, grad_out, x, n, c, s, mean, invstd, weight,
                                               grad_x, grad_weight, grad_bias);
  dispatch_floating_or_sixteen_bit(x.dtype(), "batch_norm", [&]<class T>() {
    using S = Stats<T>;
    const T *pg = grad_out.data<T>(), *px = x.data<T>();
    const S *pm = mean.data<S>(), *pi = invstd.data<S>();
    const S* pw = weight.defined() ? weight.data<S>() : nullptr;
    T* pgx = grad_x.data<T>();
    S* pgw = grad_weight.defined() ? grad_weight.data<S>() : nullptr;
    S* pgb = grad_bias.defined() ? grad_bias.data<S>() : nullptr;
    const double count = static_cast<double>(n * s);
    parallel_for(c, n * c * s, [&](int64_t ch) {
      simd_dispatch([&] {
        const S m = pm[ch];
        const double inv = static_cast<double>(pi[ch]);
        const double sum_g = channel_sum<S>(n, c, s, ch, [pg](int64_t at) { return static_cast<S>(pg[at]); });
        const double sum_g_xhat = inv * channel_sum<S>(n, c, s, ch, [pg, px, m](int64_t at) {
          return static_cast<S>(pg[at]) * (static_cast<S>(px[at]) - m);
        });
        if (pgw) pgw[ch] = static_cast<S>(sum_g_xhat);
        if (pgb) pgb[ch] = static_cast<S>(sum_g);
        // dL/dx = k (M g - sum(g) - xhat sum(g xhat)) = a g - b - cx (x - mean), in S
        const batch_norm_bodies::GradInput<S> k = batch_norm_bodies::grad_input_coefficients<S>(
            sum_g, sum_g_xhat, inv, pw ? static_cast<double>(pw[ch]) : 1.0, count);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t at = (i * c + ch) * s;
          const T *g = pg + at, *in = px + at;
          T* out = pgx + at;
          for (int64_t j = 0; j < s; ++j)
            out[j] = static_cast<T>(batch_norm_bodies::grad_input(k, m, static_cast<S>(g[j]), static_cast<S>(in[j])));
        }
      });
    });
  });
}

// The forwards, composed of the two kernels above (Note [Batch-norm forward slots]); a 16-bit x
// with 16-bit channel vectors is staged whole, so that its statistics are float32 throughout.
void batch_norm_train_forward_cpu(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                                  const Tensor& bias, double eps, const kernels::BatchNormRunning& running,
                                  const Tensor& out, const Tensor& mean, const Tensor& invstd) {
  if (!takes_directly(x, mean))
    return kernels::batch_norm_train_forward.staged(&batch_norm_train_forward_cpu, x, n, c, s, weight, bias, eps,
                                                    running, out, mean, invstd);
  kernels::batch_norm_train_forward_by_parts(x, n, c, s, weight, bias, eps, running, out, mean, invstd);
}

void batch_norm_eval_forward_cpu(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& running_mean,
                                 const Tensor& running_var, const Tensor& weight, const Tensor& bias, double eps,
                                 const Tensor& out) {
  if (!takes_directly(x, running_mean))
    return kernels::batch_norm_eval_forward.staged(&batch_norm_eval_forward_cpu, x, n, c, s, running_mean,
                                                   running_var, weight, bias, eps, out);
  kernels::batch_norm_eval_forward_by_parts(x, n, c, s, running_mean, running_var, weight, bias, eps, out);
}

// Every slot takes 16-bit inputs itself, staging those it does not compute on.
constexpr kernels::SixteenBit kDirect = kernels::SixteenBit::Native;
const bool registered =
    kernels::add_kernel(kernels::batch_norm_stats, DeviceType::CPU, &batch_norm_stats_cpu, kDirect) &&
    kernels::add_kernel(kernels::batch_norm_apply, DeviceType::CPU, &batch_norm_apply_cpu, kDirect) &&
    kernels::add_kernel(kernels::batch_norm_backward, DeviceType::CPU, &batch_norm_backward_cpu, kDirect) &&
    kernels::add_kernel(kernels::batch_norm_train_forward, DeviceType::CPU, &batch_norm_train_forward_cpu, kDirect) &&
    kernels::add_kernel(kernels::batch_norm_eval_forward, DeviceType::CPU, &batch_norm_eval_forward_cpu, kDirect);

}  // namespace
}  // namespace ember::cpu
