// CPU kernels of softmax and log_softmax over the last dim, forward and backward, one row per
// task. The formulas are the shared ones (core/kernel_bodies/softmax.h, Note [Softmax rows]);
// here they get the row reductions of loops.h and the vectorised exp (Note [Vectorisable float
// math]).
#include <algorithm>
#include <cmath>

#include "core/cpu/loops.h"
#include "core/kernel_bodies/softmax.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

namespace body = softmax_bodies;

// Note [Row loops take values]
// The per-row loops below are functions that take the row's pointers and numbers as values.
// Written inline in the lambdas that call them, they would read `in`, `o` and `n` through the
// lambda's captures; after the reductions' stores GCC can no longer prove those unchanged, and
// the elementwise loops (exp included) stayed scalar: softmax ran 3.5x slower than PyTorch's.

// One row over its n visible columns of `cols`. exp runs once per element, in T, vectorised; the
// output row holds e = exp(v - m) meanwhile.
template <class T>
void softmax_row(const T* in, T* o, int64_t n, int64_t cols, T scale, bool log, bool empty_rows_masked) {
  const T m = reduce_row<MaxOp<T>>(n, [in, scale](int64_t c) { return in[c] * scale; });
  if (empty_rows_masked && body::all_minus_infinity(m)) n = 0;
  for (int64_t c = 0; c < n; ++c) o[c] = vmath::exp(body::shifted(in[c], scale, m));
  const auto norm = body::normaliser<T>(reduce_row<SumOp<T>>(n, load_from(o)));
  if (log) {
    for (int64_t c = 0; c < n; ++c) o[c] = body::log_softmax_value(body::shifted(in[c], scale, m), norm);
  } else {
    for (int64_t c = 0; c < n; ++c) o[c] = body::softmax_value(o[c], norm);
  }
  std::fill(o + n, o + cols, body::masked_value<T>(log));
}

void softmax_cpu(const Tensor& x, const Tensor& out, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T scale = static_cast<T>(spec.scale);
    parallel_for(rows, rows * cols, [&](int64_t r) {
      simd_dispatch([&] {
        softmax_row(px + r * cols, po + r * cols, spec.visible(r, cols), cols, scale, spec.log, spec.empty_rows_masked);
      });
    });
  });
}

// One row of the gradient: the row's sum of the backward's term, then gx.
template <class T>
void softmax_backward_row(const T* py, const T* pg, T* o, int64_t n, int64_t cols, T scale, bool log) {
  if (log) {
    const T total = static_cast<T>(reduce_row<SumOp<T>>(n, load_from(pg)));
    for (int64_t c = 0; c < n; ++c) o[c] = body::log_softmax_grad(vmath::exp(py[c]), pg[c], total, scale);
  } else {
    const T dot = static_cast<T>(reduce_row<SumOp<T>>(n, [py, pg](int64_t c) { return body::backward_term(py[c], pg[c], false); }));
    for (int64_t c = 0; c < n; ++c) o[c] = body::softmax_grad(py[c], pg[c], dot, scale);
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

const bool registered =
    kernels::add_kernel(kernels::softmax, DeviceType::CPU, &softmax_cpu) &&
    kernels::add_kernel(kernels::softmax_backward, DeviceType::CPU, &softmax_backward_cpu);

}  // namespace
}  // namespace ember::cpu
