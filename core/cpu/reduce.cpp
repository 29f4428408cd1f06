// CPU kernels that reduce along one axis: sum/mean/max/min, argmax, softmax and the fused
// softmax-cross-entropy. Inputs are contiguous and seen as [outer, k, inner]. Sums run in float
// lanes folded into double block by block (Note [Lane reductions] in loops.h), and every loop
// runs through simd_dispatch (Note [SIMD dispatch]).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using kernels::ReduceOp;

// Note [Parallel full reduction]
// A reduction over one long row (sum(x) of a whole tensor is [1, numel, 1]) cuts the row into
// its blocks, reduces the blocks on the whole thread team, then folds the block results in block
// order on one thread. Those are exactly the operations reduce_row performs on one thread, in the
// same order, so the result is bitwise the same for any number of threads and any scheduling.
template <class Op, class T>
typename Op::Total reduce_long_row(const T* x, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<typename Op::Total> partial(static_cast<size_t>(blocks));
  parallel_for(blocks, n, [&](int64_t b) {
    partial[static_cast<size_t>(b)] =
        simd_dispatch([&] { return reduce_block<Op>(b * kBlock, std::min(kBlock, n - b * kBlock), load_from(x)); });
  });
  typename Op::Total total = Op::identity();
  for (const auto& p : partial) total = Op::fold(total, p);
  return total;
}

// Reduces the middle axis of x [outer, k, inner] into out [outer, inner]; finish(total) gives the
// output value (the mean divides there).
template <class Op, class T, class Finish>
void reduce_typed(const T* x, int64_t outer, int64_t k, int64_t inner, T* out, Finish finish) {
  using Lane = typename Op::Lane;
  using Total = typename Op::Total;
  if (inner == 1 && outer == 1) {
    out[0] = finish(reduce_long_row<Op>(x, k));
    return;
  }
  if (inner == 1) {  // contiguous rows, one per task
    parallel_for(outer, outer * k, [&](int64_t o) {
      out[o] = finish(simd_dispatch([&] { return reduce_row<Op>(k, load_from(x + o * k)); }));
    });
    return;
  }
  // Columns: walk k in the middle so the inner loop runs along contiguous memory; each task takes
  // up to kColumns columns of one outer index, and each accumulator folds into its double total
  // every kLaneRun rows (Note [Lane reductions]). Wide tasks matter: with 256 columns (1 KiB of
  // each 4 KiB row) sum over dim 0 of [4096, 1024] took 5x longer than with 1024, as every short
  // segment starts on a new page where the hardware prefetcher starts over.
  constexpr int64_t kColumns = 1024;
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
  parallel_for(outer * chunks, outer * k * inner, [&](int64_t t) {
    const int64_t o = t / chunks, begin = (t % chunks) * kColumns, len = std::min(kColumns, inner - begin);
    const T* base = x + o * k * inner + begin;
    simd_dispatch([&] {
      Lane acc[kColumns];
      Total total[kColumns];
      for (int64_t i = 0; i < len; ++i) total[i] = Op::identity();
      for (int64_t j0 = 0; j0 < k; j0 += kLaneRun) {
        for (int64_t i = 0; i < len; ++i) acc[i] = Op::identity();
        for (int64_t j = j0; j < std::min(k, j0 + kLaneRun); ++j) {
          const T* row = base + j * inner;
          for (int64_t i = 0; i < len; ++i) acc[i] = Op::step(acc[i], row[i]);
        }
        for (int64_t i = 0; i < len; ++i) total[i] = Op::fold(total[i], acc[i]);
      }
      for (int64_t i = 0; i < len; ++i) out[o * inner + begin + i] = finish(total[i]);
    });
  });
}

void reduce_cpu(ReduceOp op, const Tensor& x, int64_t outer, int64_t k, int64_t inner, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    auto as_is = [](auto total) { return static_cast<T>(total); };
    switch (op) {
      case ReduceOp::Sum: return reduce_typed<SumOp<T>>(px, outer, k, inner, po, as_is);
      case ReduceOp::Mean: {
        const auto count = static_cast<typename SumOp<T>::Total>(k);
        auto divide = [count](auto total) { return static_cast<T>(total / count); };
        return reduce_typed<SumOp<T>>(px, outer, k, inner, po, divide);
      }
      case ReduceOp::Max: return reduce_typed<MaxOp<T>>(px, outer, k, inner, po, as_is);
      case ReduceOp::Min: return reduce_typed<MinOp<T>>(px, outer, k, inner, po, as_is);
    }
  });
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

// Note [Row loops take values]
// The per-row loops below are functions that take the row's pointers and numbers as values.
// Written inline in the lambdas that call them, they would read `in`, `o` and `n` through the
// lambda's captures; after the reductions' stores GCC can no longer prove those unchanged, and
// the elementwise loops (exp included) stayed scalar: softmax ran 3.5x slower than PyTorch's.

// One row over its n visible columns v = scale * x: m = max, e = exp(v - m) (in [0, 1], so no
// overflow), then e / sum(e), or for log_softmax (v - m) - log(sum(e)). exp runs once per
// element, in T, vectorised; the output row holds e meanwhile. The masked rest gets 0 (log: -inf).
template <class T>
void softmax_row(const T* in, T* o, int64_t n, int64_t cols, T scale, bool log) {
  const T m = reduce_row<MaxOp<T>>(n, [in, scale](int64_t c) { return in[c] * scale; });
  for (int64_t c = 0; c < n; ++c) o[c] = vmath::exp(in[c] * scale - m);
  const double sum = reduce_row<SumOp<T>>(n, load_from(o));
  if (log) {  // (v - max) is exact; adding max back into the log term would round it away
    const T log_sum = static_cast<T>(std::log(sum));
    for (int64_t c = 0; c < n; ++c) o[c] = (in[c] * scale - m) - log_sum;
  } else {
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t c = 0; c < n; ++c) o[c] *= inv;
  }
  std::fill(o + n, o + cols, log ? -std::numeric_limits<T>::infinity() : T(0));
}

void softmax_cpu(const Tensor& x, const Tensor& out, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T scale = static_cast<T>(spec.scale);
    parallel_for(rows, rows * cols, [&](int64_t r) {
      simd_dispatch([&] { softmax_row(px + r * cols, po + r * cols, spec.visible(r, cols), cols, scale, spec.log); });
    });
  });
}

// One row of the gradient: the row's sum (of g * y, or of g for log_softmax), then gx.
template <class T>
void softmax_backward_row(const T* py, const T* pg, T* o, int64_t n, int64_t cols, T scale, bool log) {
  if (log) {
    const T total = static_cast<T>(reduce_row<SumOp<T>>(n, load_from(pg)));
    for (int64_t c = 0; c < n; ++c) o[c] = scale * (pg[c] - vmath::exp(py[c]) * total);
  } else {
    const T dot = static_cast<T>(reduce_row<SumOp<T>>(n, [py, pg](int64_t c) { return pg[c] * py[c]; }));
    for (int64_t c = 0; c < n; ++c) o[c] = scale * (py[c] * (pg[c] - dot));
  }
  std::fill(o + n, o + cols, T(0));
}

void softmax_backward_cpu(const Tensor& y, const Tensor& g, const Tensor& gx, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = y.size(-1), rows = y.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(y.dtype(), "softmax_backward", [&]<class T>() {
    const T *py = y.data<T>(), *pg = g.data<T>();
    T* pgx = gx.data<T>();
    const T scale = static_cast<T>(spec.scale);
    parallel_for(rows, rows * cols, [&](int64_t r) {
      const int64_t at = r * cols;
      simd_dispatch([&] {
        softmax_backward_row(py + at, pg + at, pgx + at, spec.visible(r, cols), cols, scale, spec.log);
      });
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
      const T m = simd_dispatch([&] { return reduce_row<MaxOp<T>>(c, load_from(row)); });
      auto exp_shifted = [row, m](int64_t j) { return vmath::exp(row[j] - m); };  // in [0, 1]: no overflow
      const double sum = simd_dispatch([&] { return reduce_row<SumOp<T>>(c, exp_shifted); });
      const double total =
          smoothing == 0 ? 0.0 : simd_dispatch([&] { return reduce_row<SumOp<T>>(c, load_from(row)); });
      const double l = static_cast<double>(m) + std::log(sum);
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
      simd_dispatch([&] {
        for (int64_t j = 0; j < c; ++j) out[j] = gr * (vmath::exp(row[j] - l) - uniform);
      });
      out[t[r]] -= gr * static_cast<T>(1.0 - smoothing);
    });
  });
}

const bool registered =
    kernels::add_kernel(kernels::reduce, DeviceType::CPU, &reduce_cpu) &&
    kernels::add_kernel(kernels::argmax, DeviceType::CPU, &argmax_cpu) &&
    kernels::add_kernel(kernels::softmax, DeviceType::CPU, &softmax_cpu) &&
    kernels::add_kernel(kernels::softmax_backward, DeviceType::CPU, &softmax_backward_cpu) &&
    kernels::add_kernel(kernels::cross_entropy_forward, DeviceType::CPU, &cross_entropy_forward_cpu) &&
    kernels::add_kernel(kernels::cross_entropy_backward, DeviceType::CPU, &cross_entropy_backward_cpu);

}  // namespace
}  // namespace ember::cpu
