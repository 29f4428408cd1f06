// CPU kernels of softmax and log_softmax over the last dim, forward and backward, one row per
// task. The formulas are the shared ones (core/kernel_bodies/softmax.h, Note [Softmax rows]);
// here they get the row reductions of loops.h and the vectorised exp (Note [Vectorisable float
// math]). bfloat16 and float16 rows compute in float32 (softmax_row).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/lane_reductions.h"
#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/cpu/vmath.h"
#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernel_bodies/softmax.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

namespace body = softmax_bodies;

// Note [Row loops take values]
// The per-row loops below are functions that take the row's pointers and numbers as values.
// Written inline in the lambdas that call them, they would read `in`, `o` and `n` through the
// lambda's captures; after the reductions' stores GCC can no longer prove those unchanged, and
// the elementwise loops (exp included) stayed scalar, and softmax ran far slower than PyTorch's
// (bench/RESULTS.md, "Figures that code comments used to quote").

// One row over its n visible columns of `cols`, in S = math::Compute<T>: a 16-bit row widens to
// float32 as it is read and rounds once as it is written, which is bitwise what staging it through
// float32 gives (Note [Sixteen-bit floats through float32]), without the two conversion passes.
// exp runs once per element, vectorised; `e` holds e = exp(v - m) meanwhile: the output row
// itself, or for a 16-bit row a float32 scratch row, so that e is not rounded before it is
// normalised.
template <class T, class S = math::Compute<T>>
void softmax_row(const T* in, T* o, S* e, int64_t n, int64_t cols, S scale, bool log, bool empty_rows_masked) {
  const S m = reduce_row<MaxOp<S>>(n, [in, scale](int64_t c) { return static_cast<S>(in[c]) * scale; });
  if (empty_rows_masked && body::all_minus_infinity(m)) n = 0;
  for (int64_t c = 0; c < n; ++c) e[c] = vmath::exp(body::shifted(static_cast<S>(in[c]), scale, m));
  const auto norm = body::normaliser<S>(reduce_row<SumOp<S>>(n, load_from(e)));
  if (log) {
    for (int64_t c = 0; c < n; ++c)
      o[c] = static_cast<T>(body::log_softmax_value(body::shifted(static_cast<S>(in[c]), scale, m), norm));
  } else {
    for (int64_t c = 0; c < n; ++c) o[c] = static_cast<T>(body::softmax_value(e[c], norm));
  }
  std::fill(o + n, o + cols, static_cast<T>(body::masked_value<S>(log)));
}

// The float32 scratch row of a 16-bit softmax, one per thread, grown as needed.
float* scratch_row(int64_t cols) {
  thread_local std::vector<float> row;
  if (static_cast<int64_t>(row.size()) < cols) row.resize(static_cast<size_t>(cols));
  return row.data();
}

void softmax_cpu(const Tensor& x, const Tensor& out, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating_or_sixteen_bit(x.dtype(), "softmax", [&]<class T>() {
    using S = math::Compute<T>;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const S scale = static_cast<S>(spec.scale);
    parallel_for(rows, rows * cols, [&](int64_t r) {
      T* o = po + r * cols;
      S* e;
      if constexpr (std::is_same_v<S, T>) e = o;
      else e = scratch_row(cols);
      simd_dispatch([&] {
        softmax_row(px + r * cols, o, e, spec.visible(r, cols), cols, scale, spec.log, spec.empty_rows_masked);
      });
    });
  });
}

// One row of the gradient: the row's sum of the backward's term, then gx, in S as above.
template <class T, class S = math::Compute<T>>
void softmax_backward_row(const T* py, const T* pg, T* o, int64_t n, int64_t cols, S scale, bool log) {
  if (log) {
    const S total = static_cast<S>(reduce_row<SumOp<S>>(n, [pg](int64_t c) { return static_cast<S>(pg[c]); }));
    for (int64_t c = 0; c < n; ++c)
      o[c] = static_cast<T>(
          body::log_softmax_grad(vmath::exp(static_cast<S>(py[c])), static_cast<S>(pg[c]), total, scale));
  } else {
    const S dot = static_cast<S>(reduce_row<SumOp<S>>(n, [py, pg](int64_t c) {
      return body::backward_term(static_cast<S>(py[c]), static_cast<S>(pg[c]), false);
    }));
    for (int64_t c = 0; c < n; ++c)
      o[c] = static_cast<T>(body::softmax_grad(static_cast<S>(py[c]), static_cast<S>(pg[c]), dot, scale));
  }
  std::fill(o + n, o + cols, T(0));
}

void softmax_backward_cpu(const Tensor& y, const Tensor& g, const Tensor& gx, const kernels::SoftmaxSpec& spec) {
  if (g.dtype() != y.dtype())
    return kernels::softmax_backward.staged(&softmax_backward_cpu, y, g, gx, spec);
  const int64_t cols = y.size(-1), rows = y.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating_or_sixteen_bit(y.dtype(), "softmax_backward", [&]<class T>() {
    using S = math::Compute<T>;
    const T *py = y.data<T>(), *pg = g.data<T>();
    T* pgx = gx.data<T>();
    const S scale = static_cast<S>(spec.scale);
    parallel_for(rows, rows * cols, [&](int64_t r) {
      const int64_t at = r * cols;
      simd_dispatch([&] {
        softmax_backward_row(py + at, pg + at, pgx + at, spec.visible(r, cols), cols, scale, spec.log);
      });
    });
  });
}

const bool registered =
    kernels::add_kernel(kernels::softmax, DeviceType::CPU, &softmax_cpu, kernels::SixteenBit::Native) &&
    kernels::add_kernel(kernels::softmax_backward, DeviceType::CPU, &softmax_backward_cpu, kernels::SixteenBit::Native);

}  // namespace
}  // namespace ember::cpu
