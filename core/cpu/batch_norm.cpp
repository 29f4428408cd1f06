// CPU kernels of batch normalisation over x seen as [n, c, s] (s = spatial size). Sums run in
// float lanes folded into double (Note [Lane reductions]) and the loops through simd_dispatch;
// each channel is independent, so channels are the parallel axis. The per-element math (apply,
// grad_x) is core/kernel_bodies/batch_norm.h, which the CUDA kernels run too.
#include <cmath>

#include "core/cpu/loops.h"
#include "core/kernel_bodies/batch_norm.h"
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

void batch_norm_stats_cpu(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& var) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    const T* px = x.data<T>();
    T* pm = mean.data<T>();
    T* pv = var.data<T>();
    const double count = static_cast<double>(n * s);
    parallel_for(c, n * c * s, [&](int64_t ch) {
      simd_dispatch([&] {
        const double mu = channel_sum<T>(n, c, s, ch, [px](int64_t at) { return px[at]; }) / count;
        // second pass: no cancellation from E[x^2] - E[x]^2
        const T m = static_cast<T>(mu);
        const double sq = channel_sum<T>(n, c, s, ch, [px, m](int64_t at) {
          const T d = px[at] - m;
          return d * d;
        });
        pm[ch] = m;
        pv[ch] = static_cast<T>(sq / count);
      });
    });
  });
}

void batch_norm_apply_cpu(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& invstd,
                          const Tensor& weight, const Tensor& bias, const Tensor& out) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    const T *px = x.data<T>(), *pm = mean.data<T>(), *pi = invstd.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T* po = out.data<T>();
    parallel_for(n * c, n * c * s, [&](int64_t r) {
      const batch_norm_bodies::Affine<T> affine = batch_norm_bodies::affine(pm, pi, pw, pb, r % c);
      const T* in = px + r * s;
      T* o = po + r * s;
      for (int64_t j = 0; j < s; ++j) o[j] = batch_norm_bodies::apply(in[j], affine);
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
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    const T *pg = grad_out.data<T>(), *px = x.data<T>(), *pm = mean.data<T>(), *pi = invstd.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    T* pgx = grad_x.data<T>();
    T* pgw = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
    T* pgb = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
    const double count = static_cast<double>(n * s);
    parallel_for(c, n * c * s, [&](int64_t ch) {
      simd_dispatch([&] {
        const T m = pm[ch];
        const double inv = static_cast<double>(pi[ch]);
        const double sum_g = channel_sum<T>(n, c, s, ch, [pg](int64_t at) { return pg[at]; });
        const double sum_g_xhat =
            inv * channel_sum<T>(n, c, s, ch, [pg, px, m](int64_t at) { return pg[at] * (px[at] - m); });
        if (pgw) pgw[ch] = static_cast<T>(sum_g_xhat);
        if (pgb) pgb[ch] = static_cast<T>(sum_g);
        // dL/dx = k (M g - sum(g) - xhat sum(g xhat)) = a g - b - cx (x - mean), in T
        const batch_norm_bodies::GradInput<T> k = batch_norm_bodies::grad_input_coefficients<T>(
            sum_g, sum_g_xhat, inv, pw ? static_cast<double>(pw[ch]) : 1.0, count);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t at = (i * c + ch) * s;
          const T *g = pg + at, *in = px + at;
          T* out = pgx + at;
          for (int64_t j = 0; j < s; ++j) out[j] = batch_norm_bodies::grad_input(k, m, g[j], in[j]);
        }
      });
    });
  });
}

const bool registered = kernels::add_kernel(kernels::batch_norm_stats, DeviceType::CPU, &batch_norm_stats_cpu) &&
                        kernels::add_kernel(kernels::batch_norm_apply, DeviceType::CPU, &batch_norm_apply_cpu) &&
                        kernels::add_kernel(kernels::batch_norm_backward, DeviceType::CPU, &batch_norm_backward_cpu) &&
                        // the forwards, composed of the two kernels above (Note [Batch-norm forward slots])
                        kernels::add_kernel(kernels::batch_norm_train_forward, DeviceType::CPU,
                                            &kernels::batch_norm_train_forward_by_parts) &&
                        kernels::add_kernel(kernels::batch_norm_eval_forward, DeviceType::CPU,
                                            &kernels::batch_norm_eval_forward_by_parts);

}  // namespace
}  // namespace ember::cpu
