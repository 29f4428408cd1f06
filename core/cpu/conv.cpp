// CPU im2col and its adjoint col2im (see Note [Convolution as im2col + gemm] in
// core/ops/conv.cpp).
//
// Note [im2col by planes]
// Input plane p = (n, c) feeds exactly the kh*kw rows p*kh*kw ... of cols ([n, c*kh*kw, oh*ow]
// flattened), and col2im writes plane p only from those rows. So both kernels split the work by
// plane: threads never share an output element, and col2im needs no atomics. Inside a row, the
// range of outputs whose input lies inside the image is computed once (Span), so the hot loop
// has no bounds checks and, at stride 1, is a plain copy (or add) the compiler vectorises.
#include <algorithm>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using kernels::Window2d;

struct Span {
  int64_t lo, hi;
};

// The outputs o in [0, count) whose input index o * stride + offset lies in [0, size).
Span inside(int64_t offset, int64_t stride, int64_t size, int64_t count) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t hi = std::min(count, size > offset ? ceil_div(size - offset, stride) : 0);
  const int64_t lo = std::min(hi, offset < 0 ? ceil_div(-offset, stride) : 0);
  return {lo, hi};
}

// Walks one plane's kh*kw cols rows (flat index `at` into them). For each stretch of outputs whose
// input lies inside the image it calls inside_run(at, in, count): outputs at .. at+count-1 see
// the inputs in, in + sw, ... (flat in the plane); every other range gets padding(begin, end).
template <class InsideRun, class Padding>
void for_each_run(const Window2d& g, InsideRun inside_run, Padding padding) {
  const int64_t cells = g.oh * g.ow;
  for (int64_t i = 0; i < g.kh; ++i) {
    const Span rows = inside(i * g.dh - g.ph, g.sh, g.h, g.oh);
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t cell = (i * g.kw + j) * cells, offset = j * g.dw - g.pw;
      const Span cols = inside(offset, g.sw, g.w, g.ow);
      padding(cell, cell + rows.lo * g.ow);
      for (int64_t o = rows.lo; o < rows.hi; ++o) {
        const int64_t at = cell + o * g.ow, ih = o * g.sh + i * g.dh - g.ph;
        padding(at, at + cols.lo);
        if (cols.lo < cols.hi) inside_run(at + cols.lo, ih * g.w + cols.lo * g.sw + offset, cols.hi - cols.lo);
        padding(at + cols.hi, at + g.ow);
      }
      padding(cell + rows.hi * g.ow, cell + cells);
    }
  }
}

void im2col_cpu(const Tensor& x, const Window2d& g, const Tensor& cols) {
  const int64_t plane_cols = g.kh * g.kw * g.oh * g.ow;
  dispatch_floating(x.dtype(), "im2col", [&]<class T>() {
    const T* px = x.data<T>();
    T* pc = cols.data<T>();
    parallel_for(g.n * g.c, g.n * g.c * plane_cols, [&](int64_t p) {
      const T* src = px + p * g.h * g.w;
      T* dst = pc + p * plane_cols;
      for_each_run(
          g,
          [&](int64_t at, int64_t in, int64_t count) {
            const T* from = src + in;
            T* to = dst + at;
            if (g.sw == 1) {
              std::copy_n(from, count, to);
            } else {
              for (int64_t k = 0; k < count; ++k) to[k] = from[k * g.sw];
            }
          },
          [&](int64_t begin, int64_t end) { std::fill(dst + begin, dst + end, T(0)); });
    });
  });
}

void col2im_cpu(const Tensor& cols, const Window2d& g, const Tensor& x) {
  const int64_t plane_cols = g.kh * g.kw * g.oh * g.ow;
  dispatch_floating(x.dtype(), "col2im", [&]<class T>() {
    const T* pc = cols.data<T>();
    T* px = x.data<T>();
    parallel_for(g.n * g.c, g.n * g.c * plane_cols, [&](int64_t p) {
      const T* src = pc + p * plane_cols;
      T* dst = px + p * g.h * g.w;
      for_each_run(
          g,
          [&](int64_t at, int64_t in, int64_t count) {
            const T* from = src + at;
            T* to = dst + in;
            if (g.sw == 1) {  // the common case, kept separate so it vectorises
              for (int64_t k = 0; k < count; ++k) to[k] += from[k];
            } else {
              for (int64_t k = 0; k < count; ++k) to[k * g.sw] += from[k];
            }
          },
          [](int64_t, int64_t) {});  // padding receives nothing
    });
  });
}

const bool registered = kernels::add_kernel(kernels::im2col, DeviceType::CPU, &im2col_cpu) &&
                        kernels::add_kernel(kernels::col2im, DeviceType::CPU, &col2im_cpu);

}  // namespace
}  // namespace ember::cpu
