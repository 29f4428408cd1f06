// CPU kernels that reduce along one axis: sum/mean/max/min, argmax, softmax and the fused
// softmax-cross-entropy. Inputs are contiguous and seen as [outer, k, inner]; sums accumulate
// in double so a float32 sum over a long axis does not drift.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using kernels::ReduceOp;

template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

template <class T>
void reduce_typed(ReduceOp op, const T* x, int64_t outer, int64_t k, int64_t inner, T* out) {
  const bool extremum = op == ReduceOp::Max || op == ReduceOp::Min;
  const double scale = op == ReduceOp::Mean ? 1.0 / static_cast<double>(k) : 1.0;
  auto combine = [op](Acc<T> a, Acc<T> v) -> Acc<T> {
    if (op == ReduceOp::Max) return v > a || std::isnan(static_cast<double>(v)) ? v : a;
    if (op == ReduceOp::Min) return v < a || std::isnan(static_cast<double>(v)) ? v : a;
    return static_cast<Acc<T>>(a + v);
  };
  if (inner == 1) {  // reduce contiguous rows
    parallel_for(outer, outer * k, [&](int64_t o) {
      const T* row = x + o * k;
      Acc<T> acc = extremum ? static_cast<Acc<T>>(row[0]) : Acc<T>(0);
      for (int64_t j = extremum ? 1 : 0; j < k; ++j) acc = combine(acc, static_cast<Acc<T>>(row[j]));
      out[o] = static_cast<T>(extremum ? acc : acc * scale);
    });
    return;
  }
  // [outer, k, inner]: walk k in the middle so the inner loop is contiguous.
  constexpr int64_t kChunk = 256;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  parallel_for(outer * chunks, outer * k * inner, [&](int64_t t) {
    const int64_t o = t / chunks, begin = (t % chunks) * kChunk, len = std::min(kChunk, inner - begin);
    Acc<T> acc[kChunk];
    const T* base = x + o * k * inner + begin;
    for (int64_t i = 0; i < len; ++i) acc[i] = extremum ? static_cast<Acc<T>>(base[i]) : Acc<T>(0);
    for (int64_t j = extremum ? 1 : 0; j < k; ++j) {
      const T* row = base + j * inner;
      for (int64_t i = 0; i < len; ++i) acc[i] = combine(acc[i], static_cast<Acc<T>>(row[i]));
    }
    T* dst = out + o * inner + begin;
    for (int64_t i = 0; i < len; ++i) dst[i] = static_cast<T>(extremum ? acc[i] : acc[i] * scale);
  });
}

void reduce_cpu(ReduceOp op, const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() { reduce_typed<T>(op, x.data<T>(), outer, k, inner, out.data<T>()); });
}

void argmax_cpu(const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    int64_t* po = out.data<int64_t>();
    parallel_for(outer * inner, outer * k * inner, [&](int64_t t) {
      const int64_t o = t / inner, i = t % inner;
      const T* base = px + o * k * inner + i;
      int64_t best = 0;
      for (int64_t j = 1; j < k; ++j)
        if (base[j * inner] > base[best * inner]) best = j;
      po[t] = best;
    });
  });
}

void softmax_cpu(const Tensor& x, const Tensor& out, bool log) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(rows, rows * cols, [&](int64_t r) {
      const T* in = px + r * cols;
      T* o = po + r * cols;
      T m = *std::max_element(in, in + cols);
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(in[c] - m));
      if (log) {  // (x - max) is exact; adding max back into the log term would round it away
        const T log_sum = static_cast<T>(std::log(sum));
        for (int64_t c = 0; c < cols; ++c) o[c] = (in[c] - m) - log_sum;
      } else {
        const double inv = 1.0 / sum;
        for (int64_t c = 0; c < cols; ++c) o[c] = static_cast<T>(std::exp(static_cast<double>(in[c] - m)) * inv);
      }
    });
  });
}

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
      double m = static_cast<double>(*std::max_element(row, row + c)), sum = 0, total = 0;
      for (int64_t j = 0; j < c; ++j) {
        sum += std::exp(static_cast<double>(row[j]) - m);
        total += static_cast<double>(row[j]);
      }
      const double l = m + std::log(sum);
      plse[r] = static_cast<T>(l);
      if (t[r] == ignore_index) {
        pl[r] = T(0);
        return;
      }
      // -sum_j q_j log p_j with q = (1 - s) onehot(t) + s / C, and log p_j = x_j - lse
      pl[r] = static_cast<T>(l - (1.0 - smoothing) * static_cast<double>(row[t[r]]) -
                             smoothing / static_cast<double>(c) * total);
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
    const T uniform = static_cast<T>(smoothing / static_cast<double>(c));
    parallel_for(n, n * c, [&](int64_t r) {
      T* out = gx + r * c;
      if (t[r] == ignore_index) {
        std::fill(out, out + c, T(0));
        return;
      }
      const T* row = x + r * c;
      const T gr = g[r], l = plse[r];
      for (int64_t j = 0; j < c; ++j) out[j] = gr * (std::exp(row[j] - l) - uniform);
      out[t[r]] -= gr * static_cast<T>(1.0 - smoothing);
    });
  });
}

const bool registered =
    kernels::add_kernel(kernels::reduce, DeviceType::CPU, &reduce_cpu) &&
    kernels::add_kernel(kernels::argmax, DeviceType::CPU, &argmax_cpu) &&
    kernels::add_kernel(kernels::softmax, DeviceType::CPU, &softmax_cpu) &&
    kernels::add_kernel(kernels::cross_entropy_forward, DeviceType::CPU, &cross_entropy_forward_cpu) &&
    kernels::add_kernel(kernels::cross_entropy_backward, DeviceType::CPU, &cross_entropy_backward_cpu);

}  // namespace
}  // namespace ember::cpu
