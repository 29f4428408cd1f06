// CPU kernels of the fused softmax cross-entropy over [n, c] logits, one row per task, with the
// shared formulas of core/kernel_bodies/cross_entropy.h (Note [Cross-entropy with label
// smoothing]) and loops.h's row reductions and vectorised exp.
#include <algorithm>
#include <cmath>

#include "core/cpu/lane_reductions.h"
#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/cpu/vmath.h"
#include "core/kernel_bodies/cross_entropy.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

namespace body = cross_entropy_bodies;

void cross_entropy_forward_cpu(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                               double smoothing, const Tensor& loss, const Tensor& lse) {
  const int64_t n = logits.size(0), c = logits.size(1);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    const T* x = logits.data<T>();
    const int64_t* t = target.data<int64_t>();
    T* pl = loss.data<T>();
    T* plse = lse.data<T>();
    parallel_for(n, n * c, [&](int64_t r) {
      const T* row = x + r * c;
      const T m = simd_dispatch([&] { return reduce_row<MaxOp<T>>(c, load_from(row)); });
      auto exp_shifted = [row, m](int64_t j) { return vmath::exp(row[j] - m); };  // in [0, 1]: no overflow
      const double sum = simd_dispatch([&] { return reduce_row<SumOp<T>>(c, exp_shifted); });
      const double total =
          smoothing == 0 ? 0.0 : simd_dispatch([&] { return reduce_row<SumOp<T>>(c, load_from(row)); });
      const double l = body::log_sum_exp(static_cast<double>(m), sum);
      plse[r] = static_cast<T>(l);
      pl[r] = t[r] == ignore_index ? T(0)
                                   : static_cast<T>(body::loss(l, static_cast<double>(row[t[r]]), total, smoothing, c));
    });
  });
}

void cross_entropy_backward_cpu(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                const Tensor& grad_loss, int64_t ignore_index, double smoothing,
                                const Tensor& grad_logits) {
  const int64_t n = logits.size(0), c = logits.size(1);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    const T* x = logits.data<T>();
    const int64_t* t = target.data<int64_t>();
    const T* plse = lse.data<T>();
    const T* g = grad_loss.data<T>();
    T* gx = grad_logits.data<T>();
    const auto weights = body::grad_weights<T>(smoothing, c);
    parallel_for(n, n * c, [&](int64_t r) {
      T* out = gx + r * c;
      if (t[r] == ignore_index) {
        std::fill(out, out + c, T(0));
        return;
      }
      const T* row = x + r * c;
      const T gr = g[r], l = plse[r];
      simd_dispatch([&] {
        for (int64_t j = 0; j < c; ++j) out[j] = body::grad(gr, vmath::exp(row[j] - l), weights);
      });
      out[t[r]] -= body::target_term(gr, weights);
    });
  });
}

const bool registered =
    kernels::add_kernel(kernels::cross_entropy_forward, DeviceType::CPU, &cross_entropy_forward_cpu) &&
    kernels::add_kernel(kernels::cross_entropy_backward, DeviceType::CPU, &cross_entropy_backward_cpu);

}  // namespace
}  // namespace ember::cpu
