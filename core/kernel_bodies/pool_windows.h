#pragma once
// Where each output cell's window lies in the input, and what max and average pooling compute
// over one window, for the pooling kernels of both devices (core/cpu/pool.cpp, cuda/pool.cu), so
// the two cannot disagree on a border, a tie or a NaN.
#include <cmath>
#include <cstdint>

#include "core/kernel_bodies/host_device.h"
#include "core/kernels/conv_pool.h"

namespace ember::pooling {

// Input rows [h0, h1) and columns [w0, w1) of one window, clipped to the image.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;  // what an average divides the window's sum by
  EMBER_HOST_DEVICE bool covers(int64_t h, int64_t w) const { return h >= h0 && h < h1 && w >= w0 && w < w1; }
};

// A range [lo, hi] (inclusive) of output indices along one dim whose windows may cover an input
// index: every window that covers it is in the range, though not every one in it need cover.
struct Candidates {
  int64_t lo, hi;
};

EMBER_HOST_DEVICE int64_t clip(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

// Strided, padded windows (max_pool2d, avg_pool2d).
struct PoolWindows {
  kernels::Window2d g;
  bool count_include_pad;
  EMBER_HOST_DEVICE Window operator()(int64_t oh, int64_t ow) const {
    const int64_t h = oh * g.sh - g.ph, w = ow * g.sw - g.pw;
    Window win{clip(h, 0, g.h), clip(h + g.kh, 0, g.h), clip(w, 0, g.w), clip(w + g.kw, 0, g.w), 0};
    // Without ceil_mode a window never reaches past the padding, so it always covers kh * kw cells.
    win.divisor = count_include_pad ? g.kh * g.kw : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  // Window o starts at o * stride - pad and spans `kernel`: it covers i iff
  // (i + pad - kernel + 1) / stride <= o <= (i + pad) / stride. (The lower end is rounded down, or
  // towards zero and clipped, which only widens the range.)
  EMBER_HOST_DEVICE static Candidates along(int64_t i, int64_t kernel, int64_t stride, int64_t pad, int64_t out) {
    return {clip((i + pad - kernel) / stride, 0, out), clip((i + pad) / stride, -1, out - 1)};
  }
  EMBER_HOST_DEVICE Candidates rows(int64_t h) const { return along(h, g.kh, g.sh, g.ph, g.oh); }
  EMBER_HOST_DEVICE Candidates cols(int64_t w) const { return along(w, g.kw, g.sw, g.pw, g.ow); }
};

// adaptive_avg_pool2d: cell o of `out` covers [floor(o * in / out), ceil((o + 1) * in / out)).
struct AdaptiveWindows {
  kernels::Window2d g;
  EMBER_HOST_DEVICE static int64_t begin(int64_t o, int64_t in, int64_t out) { return o * in / out; }
  EMBER_HOST_DEVICE static int64_t end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }
  EMBER_HOST_DEVICE Window operator()(int64_t oh, int64_t ow) const {
    Window win{begin(oh, g.h, g.oh), end(oh, g.h, g.oh), begin(ow, g.w, g.ow), end(ow, g.w, g.ow), 0};
    win.divisor = (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  // Cell o covers i iff floor(i * out / in) <= o <= ceil((i + 1) * out / in) - 1.
  EMBER_HOST_DEVICE static Candidates along(int64_t i, int64_t in, int64_t out) {
    return {i * out / in, clip(((i + 1) * out + in - 1) / in - 1, -1, out - 1)};
  }
  EMBER_HOST_DEVICE Candidates rows(int64_t h) const { return along(h, g.h, g.oh); }
  EMBER_HOST_DEVICE Candidates cols(int64_t w) const { return along(w, g.w, g.ow); }
};

template <class T>
struct WindowMax {
  T value;
  int64_t at;  // flat position h * width + w in the plane
};

// The first maximum of the window wins; a NaN wins and stays, as in PyTorch (v != v: NaN).
template <class T>
EMBER_HOST_DEVICE WindowMax<T> window_max(const T* plane, int64_t width, const Window& win) {
  WindowMax<T> best{-static_cast<T>(INFINITY), win.h0 * width + win.w0};
  for (int64_t h = win.h0; h < win.h1; ++h) {
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const T v = plane[h * width + w];
      if (v > best.value || v != v) best = {v, h * width + w};
    }
  }
  return best;
}

// The window's average, summed in double in row order.
template <class T>
EMBER_HOST_DEVICE T window_average(const T* plane, int64_t width, const Window& win) {
  double sum = 0;
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) sum += static_cast<double>(plane[h * width + w]);
  return static_cast<T>(sum / static_cast<double>(win.divisor));
}

}  // namespace ember::pooling
