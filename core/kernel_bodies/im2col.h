#pragma once
// The per-thread bodies of the CUDA convolution's im2col and col2im (cuda/conv.cu), written as
// host-device code so that tests/test_kernel_bodies.cpp runs these very bodies on the CPU over
// every index and compares them with naive loops.
//
// Note [im2col indexing]
// Integer division is slow on a GPU (a 64-bit one is a call of ~70 instructions), so the bodies
// divide as little as they can:
//  - im2col gives one thread to each output cell (n, c, oh, ow) of a plane, which writes the
//    kh*kw column entries of that cell: three divisions for kh*kw entries, where a thread per
//    entry needed about ten for each one. Consecutive threads write consecutive columns.
//  - col2im gives one thread to each input cell (n, c, h, w), which adds the column entries that
//    read it, over the taps (i, j) in order. Output row oh reads row h through tap i iff
//    h + ph - i*dh = oh*sh. The quotient and remainder of h + ph by sh are taken once and then
//    stepped down by those of dh at each tap (a carry instead of a division); the same for the
//    columns. Five divisions per input cell instead of four per tap.
//  - Index type I is int32_t when every index of the launch fits (the columns and the input have
//    at most 2^31 - 1 elements), int64_t otherwise: 32-bit division is several times cheaper.
// The tap order is the CPU's col2im order, so the sums are added in the same order on both.
#include <cstdint>

#include "core/kernel_bodies/host_device.h"
#include "core/kernels/conv_pool.h"

namespace ember::conv_bodies {

// The window geometry in index type I (see the Note).
template <class I>
struct Geometry {
  I c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  static Geometry from(const kernels::Window2d& g) {
    auto i = [](int64_t v) { return static_cast<I>(v); };
    return {i(g.c), i(g.h), i(g.w), i(g.kh), i(g.kw), i(g.sh), i(g.sw), i(g.ph), i(g.pw), i(g.dh), i(g.dw), i(g.oh), i(g.ow)};
  }
};

// Where the columns live: entry (sample n, row r = (c*kh + i)*kw + j, output cell o) is at
// n * sample_stride + r * row_stride + o. [N, C*KH*KW, OH*OW] is {C*KH*KW*OH*OW, OH*OW}; the
// weight gradient's [C*KH*KW, N, OH*OW] (one matrix over the whole batch) is {OH*OW, N*OH*OW}.
template <class I>
struct ColumnLayout {
  I sample_stride, row_stride;
};

// Thread t in [0, N*C*OH*OW) is output cell o = t % (OH*OW) of plane (n, c) = t / (OH*OW): it
// writes cols[n, (c*kh + i)*kw + j, o] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] for every
// tap, or 0 where the tap is in the padding.
template <class T, class I>
struct Im2colBody {
  const T* x;
  Geometry<I> g;
  ColumnLayout<I> layout;
  T* cols;
  EMBER_HOST_DEVICE void operator()(int64_t thread) const {
    const I t = static_cast<I>(thread), cells = g.oh * g.ow;
    const I plane = t / cells, o = t - plane * cells;
    const I n = plane / g.c, c = plane - n * g.c;
    const I oh = o / g.ow, ow = o - oh * g.ow;
    const T* src = x + plane * g.h * g.w;
    const I base = n * layout.sample_stride + o, first_row = c * g.kh * g.kw;
    const I top = oh * g.sh - g.ph, left = ow * g.sw - g.pw;
    for (I i = 0; i < g.kh; ++i) {
      const I h = top + i * g.dh;
      const bool row_inside = h >= 0 && h < g.h;
      for (I j = 0; j < g.kw; ++j) {
        const I w = left + j * g.dw;
        // (an index, not a pointer stepped past the last row: every product stays below numel)
        cols[base + (first_row + i * g.kw + j) * layout.row_stride] = row_inside && w >= 0 && w < g.w ? src[h * g.w + w] : T(0);
      }
    }
  }
};

// How the outputs that read one input index step from tap to tap along a dim: the quotient and
// remainder of the dilation by the stride (worked out on the host, once per launch).
template <class I>
struct TapStep {
  I stride, dq, dr;
  static TapStep of(I stride, I dilation) { return {stride, dilation / stride, dilation % stride}; }
};

// The output along one dim that reads input index `at` through tap 0, 1, 2, ...: it is
// q = (at + pad - tap*dilation) / stride when the remainder r is 0. (q, r) starts as the quotient
// and remainder of at + pad and steps down by (dq, dr) with a borrow (see the Note); q never
// grows, so once it is negative no later tap reads `at`.
template <class I>
struct TapWalk {
  I q, r;
  EMBER_HOST_DEVICE TapWalk(I at_plus_pad, const TapStep<I>& step)
      : q(at_plus_pad / step.stride), r(at_plus_pad - q * step.stride) {}
  EMBER_HOST_DEVICE bool hits(I out) const { return r == 0 && q >= 0 && q < out; }
  EMBER_HOST_DEVICE void next(const TapStep<I>& step) {
    q -= step.dq;
    r -= step.dr;
    if (r < 0) {
      r += step.stride;
      --q;
    }
  }
};

// Thread t in [0, N*C*H*W) is input cell (n, c, h, w): grad_x[t] = the sum of the column entries
// that read it, tap by tap in (i, j) order.
template <class T, class I>
struct Col2imBody {
  const T* cols;
  Geometry<I> g;
  ColumnLayout<I> layout;
  TapStep<I> rows, columns;  // TapStep::of(g.sh, g.dh), TapStep::of(g.sw, g.dw)
  T* grad_x;
  EMBER_HOST_DEVICE void operator()(int64_t thread) const {
    const I t = static_cast<I>(thread);
    const I rest = t / g.w, w = t - rest * g.w;
    const I plane = rest / g.h, h = rest - plane * g.h;
    const I n = plane / g.c, c = plane - n * g.c;
    const I base = n * layout.sample_stride, first_row = c * g.kh * g.kw;
    T sum = T(0);
    const TapWalk<I> first_col(w + g.pw, columns);
    TapWalk<I> row(h + g.ph, rows);
    for (I i = 0; i < g.kh && row.q >= 0; ++i, row.next(rows)) {
      if (!row.hits(g.oh)) continue;
      TapWalk<I> col = first_col;
      for (I j = 0; j < g.kw && col.q >= 0; ++j, col.next(columns)) {
        if (col.hits(g.ow))
          sum += cols[base + (first_row + i * g.kw + j) * layout.row_stride + row.q * g.ow + col.q];
      }
    }
    grad_x[t] = sum;
  }
};

}  // namespace ember::conv_bodies
