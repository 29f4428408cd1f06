// CPU kernels of layer normalisation over x seen as [rows, cols]. Rows are independent, so they
// are the parallel axis of the forward and of grad_x; grad_weight and grad_bias sum over rows, so
// they run over blocks of columns instead, each adding its rows in order (deterministic for any
// thread count).
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// The sums over j in [0, n) of first(j) and of second(j), in double. kPairLanes independent
// accumulators per sum make the loop over lanes elementwise, so it vectorises (Note [Lane
// reductions] explains the idea); the lanes are folded in a fixed order.
constexpr int kPairLanes = 8;

template <class First, class Second>
std::pair<double, double> sum_pair(int64_t n, const First& first, const Second& second) {
  double a[kPairLanes] = {}, b[kPairLanes] = {};
  const int64_t whole = n - n % kPairLanes;
  for (int64_t j = 0; j < whole; j += kPairLanes) {
    for (int l = 0; l < kPairLanes; ++l) {
      a[l] += first(j + l);
      b[l] += second(j + l);
    }
  }
  for (int64_t j = whole; j < n; ++j) {
    a[0] += first(j);
    b[0] += second(j);
  }
  double sa = 0, sb = 0;
  for (int l = 0; l < kPairLanes; ++l) {
    sa += a[l];
    sb += b[l];
  }
  return {sa, sb};
}

// Note [Layer-norm statistics]
// One pass over a row gives the sums of d and d^2 for d = x - x[0], in double, and then
//   mean = x[0] + sum(d) / n,   var = sum(d^2) / n - (sum(d) / n)^2.
// The textbook one-pass formula E[x^2] - E[x]^2 cancels badly when the mean is large next to
// the spread: the variance is then the small difference of two large numbers. Shifting by an
// element of the row makes both terms of the size of the spread, and double carries 29 more bits
// than a float32 input. (Welford's update is also one pass and stable, but it divides for every
// element and does not vectorise.) Rounding can still leave a tiny negative variance: it is
// clamped to 0. The statistics are stored in x's dtype as mean and rstd = 1 / sqrt(var + eps).
void layer_norm_forward_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                            const Tensor& mean, const Tensor& rstd) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    const int64_t rows = x.size(0), cols = x.size(1);
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T *po = out.data<T>(), *pm = mean.data<T>(), *pr = rstd.data<T>();
    parallel_for(rows, rows * cols, [&](int64_t r) {
      simd_dispatch([&] {
        const T* in = px + r * cols;
        T* o = po + r * cols;
        const double shift = static_cast<double>(in[0]);
        auto centred = [&](int64_t j) { return static_cast<double>(in[j]) - shift; };
        const auto [sum, sum_sq] = sum_pair(cols, centred, [&](int64_t j) { return centred(j) * centred(j); });
        const double offset = sum / static_cast<double>(cols);
        const double var = std::max(sum_sq / static_cast<double>(cols) - offset * offset, 0.0);
        const T m = static_cast<T>(shift + offset), inv = static_cast<T>(1.0 / std::sqrt(var + eps));
        pm[r] = m;
        pr[r] = inv;
        for (int64_t j = 0; j < cols; ++j) o[j] = (in[j] - m) * inv * (pw ? pw[j] : T(1)) + (pb ? pb[j] : T(0));
      });
    });
  });
}

// Note [Layer-norm backward]
// Per row, with xhat = (x - mean) * rstd over its n columns and y = w * xhat + b:
//   dL/dx = rstd * (w g - mean(w g) - xhat * mean(w g xhat)),
// where the two means are the only cross-column terms (they come from differentiating through
// the row's mean and variance). dL/dw = sum over rows of g * xhat and dL/db = sum over rows of g.
void layer_norm_backward_cpu(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                             const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                             const Tensor& grad_bias) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    const int64_t rows = x.size(0), cols = x.size(1);
    const T *pg = grad_out.data<T>(), *px = x.data<T>(), *pm = mean.data<T>(), *pr = rstd.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    T* pgx = grad_x.data<T>();
    parallel_for(rows, rows * cols, [&](int64_t r) {
      simd_dispatch([&] {
        const T *g = pg + r * cols, *in = px + r * cols;
        const T m = pm[r], inv = pr[r];
        auto wg = [&](int64_t j) { return static_cast<double>(g[j]) * (pw ? static_cast<double>(pw[j]) : 1.0); };
        const auto [sum_wg, sum_wg_xhat] = sum_pair(cols, wg, [&](int64_t j) {
          return wg(j) * static_cast<double>((in[j] - m) * inv);
        });
        const T a = static_cast<T>(sum_wg / static_cast<double>(cols));
        const T b = static_cast<T>(sum_wg_xhat / static_cast<double>(cols));
        T* out = pgx + r * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const T xhat = (in[j] - m) * inv;
          out[j] = inv * ((pw ? pw[j] : T(1)) * g[j] - a - xhat * b);
        }
      });
    });
    if (!grad_weight.defined() && !grad_bias.defined()) return;
    T* pgw = grad_weight.defined() ? grad_weight.data<T>() : nullptr;
    T* pgb = grad_bias.defined() ? grad_bias.data<T>() : nullptr;
    constexpr int64_t kColumns = 64;  // columns per task: one double accumulator each for w and b
    const int64_t blocks = (cols + kColumns - 1) / kColumns;
    parallel_for(blocks, rows * cols, [&](int64_t blk) {
      simd_dispatch([&] {
        const int64_t begin = blk * kColumns, width = std::min(kColumns, cols - begin);
        double acc_w[kColumns] = {}, acc_b[kColumns] = {};
        for (int64_t r = 0; r < rows; ++r) {
          const T *g = pg + r * cols + begin, *in = px + r * cols + begin;
          const T m = pm[r], inv = pr[r];
          for (int64_t j = 0; j < width; ++j) {
            acc_w[j] += static_cast<double>(g[j] * ((in[j] - m) * inv));
            acc_b[j] += static_cast<double>(g[j]);
          }
        }
        for (int64_t j = 0; j < width; ++j) {
          if (pgw) pgw[begin + j] = static_cast<T>(acc_w[j]);
          if (pgb) pgb[begin + j] = static_cast<T>(acc_b[j]);
        }
      });
    });
  });
}

const bool registered =
    kernels::add_kernel(kernels::layer_norm_forward, DeviceType::CPU, &layer_norm_forward_cpu) &&
    kernels::add_kernel(kernels::layer_norm_backward, DeviceType::CPU, &layer_norm_backward_cpu);

}  // namespace
}  // namespace ember::cpu
