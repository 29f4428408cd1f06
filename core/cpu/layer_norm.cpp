// CPU kernels of layer normalisation over x seen as [rows, cols], with the shared math of
// core/kernel_bodies/layer_norm.h. Rows are independent, so they are the parallel axis of the
// forward and of grad_x; grad_weight and grad_bias sum over rows, so they run over blocks of
// columns instead, each adding its rows in order (deterministic for any thread count).
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/cpu/lane_reductions.h"
#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/kernel_bodies/layer_norm.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

namespace body = layer_norm_bodies;

// The sums over j in [0, n) of first(j) and of second(j), in double: two lane reductions (Note
// [Lane reductions]) over a row that stays in cache between them.
template <class First, class Second>
std::pair<double, double> sum_pair(int64_t n, const First& first, const Second& second) {
  return {reduce_row<SumOp<double>>(n, first), reduce_row<SumOp<double>>(n, second)};
}

// The statistics of Note [Layer-norm statistics], each row's sums taken by sum_pair.
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
        auto centred = [&](int64_t j) { return math::centred(in[j], shift); };
        const auto [sum, sum_sq] = sum_pair(cols, centred, [&](int64_t j) { return centred(j) * centred(j); });
        const auto st = body::statistics<T>(shift, sum, sum_sq, cols, eps);
        pm[r] = st.mean;
        pr[r] = st.rstd;
        for (int64_t j = 0; j < cols; ++j) o[j] = body::normalize(in[j], st, pw, pb, j);
      });
    });
  });
}

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
        const body::RowStatistics<T> st{pm[r], pr[r]};
        auto wg = [&](int64_t j) { return body::weighted_grad(g[j], pw, j); };
        const auto [sum_wg, sum_wg_xhat] = sum_pair(cols, wg, [&](int64_t j) {
          return wg(j) * static_cast<double>(body::xhat(in[j], st));
        });
        const auto means = body::grad_means<T>(sum_wg, sum_wg_xhat, cols);
        T* out = pgx + r * cols;
        for (int64_t j = 0; j < cols; ++j) out[j] = body::grad_x(g[j], in[j], st, pw, j, means);
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
          const body::RowStatistics<T> st{pm[r], pr[r]};
          for (int64_t j = 0; j < width; ++j) {
            acc_w[j] += body::weight_grad_term(g[j], in[j], st);
            acc_b[j] += body::bias_grad_term(g[j]);
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
