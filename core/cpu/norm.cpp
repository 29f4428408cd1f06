// CPU kernels of batch normalisation over x seen as [n, c, s] (s = spatial size). Statistics
// accumulate in double; each channel is independent, so channels are the parallel axis.
#include <cmath>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

void batch_norm_stats_cpu(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& mean, const Tensor& var) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    const T* px = x.data<T>();
    T* pm = mean.data<T>();
    T* pv = var.data<T>();
    const double count = static_cast<double>(n * s);
    parallel_for(c, n * c * s, [&](int64_t ch) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T* row = px + (i * c + ch) * s;
        for (int64_t j = 0; j < s; ++j) sum += static_cast<double>(row[j]);
      }
      const double mu = sum / count;
      double sq = 0;  // second pass: no cancellation from E[x^2] - E[x]^2
      for (int64_t i = 0; i < n; ++i) {
        const T* row = px + (i * c + ch) * s;
        for (int64_t j = 0; j < s; ++j) {
          const double d = static_cast<double>(row[j]) - mu;
          sq += d * d;
        }
      }
      pm[ch] = static_cast<T>(mu);
      pv[ch] = static_cast<T>(sq / count);
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
      const int64_t ch = r % c;
      const T scale = pi[ch] * (pw ? pw[ch] : T(1));
      const T shift = (pb ? pb[ch] : T(0)) - pm[ch] * scale;
      const T* in = px + r * s;
      T* o = po + r * s;
      for (int64_t j = 0; j < s; ++j) o[j] = in[j] * scale + shift;
    });
  });
}

// Note [Batch-norm backward]
// With xhat = (x - mean) * invstd over M = n * s values of a channel, and y = w * xhat + b:
//   dL/db = sum(g),  dL/dw = sum(g * xhat),
//   dL/dx = w * invstd / M * (M * g - sum(g) - xhat * sum(g * xhat)).
// The two sums are the only cross-element terms, so one pass computes them and a second writes
// dL/dx: cheaper than differentiating the composition of mean, var and normalise op by op.
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
      const double mu = static_cast<double>(pm[ch]), inv = static_cast<double>(pi[ch]);
      double sum_g = 0, sum_gx = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T* g = pg + (i * c + ch) * s;
        const T* in = px + (i * c + ch) * s;
        for (int64_t j = 0; j < s; ++j) {
          sum_g += static_cast<double>(g[j]);
          sum_gx += static_cast<double>(g[j]) * (static_cast<double>(in[j]) - mu);
        }
      }
      const double sum_g_xhat = sum_gx * inv;
      if (pgw) pgw[ch] = static_cast<T>(sum_g_xhat);
      if (pgb) pgb[ch] = static_cast<T>(sum_g);
      const double k = (pw ? static_cast<double>(pw[ch]) : 1.0) * inv / count;
      for (int64_t i = 0; i < n; ++i) {
        const T* g = pg + (i * c + ch) * s;
        const T* in = px + (i * c + ch) * s;
        T* out = pgx + (i * c + ch) * s;
        for (int64_t j = 0; j < s; ++j) {
          const double xhat = (static_cast<double>(in[j]) - mu) * inv;
          out[j] = static_cast<T>(k * (count * static_cast<double>(g[j]) - sum_g - xhat * sum_g_xhat));
        }
      }
    });
  });
}

const bool registered = kernels::add_kernel(kernels::batch_norm_stats, DeviceType::CPU, &batch_norm_stats_cpu) &&
                        kernels::add_kernel(kernels::batch_norm_apply, DeviceType::CPU, &batch_norm_apply_cpu) &&
                        kernels::add_kernel(kernels::batch_norm_backward, DeviceType::CPU, &batch_norm_backward_cpu);

}  // namespace
}  // namespace ember::cpu
