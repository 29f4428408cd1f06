#pragma once
// The per-thread bodies of the CUDA pooling kernels (cuda/pool.cu), host-device code over the
// window rules of core/kernel_bodies/pool_windows.h, so tests/test_kernel_bodies.cpp runs them on the CPU over
// every index against naive loops. The backwards gather (Note [Pooling backward by gathering]
// in cuda/pool.cu).
#include <cstdint>

#include "core/kernel_bodies/host_device.h"
#include "core/kernel_bodies/pool_windows.h"
#include "core/kernels/conv_pool.h"

namespace ember::pooling {

// Thread i is output cell i of [n, c, oh, ow]: the first maximum of its window and its flat
// position h * w + w in the plane.
template <class T>
struct MaxPoolForwardBody {
  const T* x;
  PoolWindows windows;
  T* out;
  int64_t* indices;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const kernels::Window2d& g = windows.g;
    const int64_t cells = g.oh * g.ow, plane = i / cells, o = i % cells;
    const WindowMax<T> best = window_max(x + plane * g.h * g.w, g.w, windows(o / g.ow, o % g.ow));
    out[i] = best.value;
    indices[i] = best.at;
  }
};

// Thread i is output cell i: the average of its window (PoolWindows or AdaptiveWindows).
template <class T, class Windows>
struct AverageForwardBody {
  const T* x;
  Windows windows;
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const kernels::Window2d& g = windows.g;
    const int64_t cells = g.oh * g.ow, plane = i / cells, o = i % cells;
    out[i] = window_average(x + plane * g.h * g.w, g.w, windows(o / g.ow, o % g.ow));
  }
};

// Thread i is input cell i of grad_x [n, c, h, w]: it gathers from the windows that cover it,
// in increasing output order; `share(o, win, cell)` is what window o sends to `cell` (flat
// h * w + w in the plane).
template <class T, class Windows, class Share>
struct GatherBody {
  Windows windows;
  Share share;
  T* grad_x;
  bool accumulate;  // max pooling adds to grad_x (zero-filled by the caller); averages write it
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const kernels::Window2d& g = windows.g;
    const int64_t plane = i / (g.h * g.w), cell = i % (g.h * g.w), h = cell / g.w, w = cell % g.w;
    const Candidates rows = windows.rows(h), cols = windows.cols(w);
    T sum = accumulate ? grad_x[i] : T(0);
    for (int64_t oh = rows.lo; oh <= rows.hi; ++oh) {
      for (int64_t ow = cols.lo; ow <= cols.hi; ++ow) {
        const Window win = windows(oh, ow);
        if (!win.covers(h, w)) continue;
        sum += share(plane * g.oh * g.ow + oh * g.ow + ow, win, cell);
      }
    }
    grad_x[i] = sum;
  }
};

// Max pooling's backward: a window sends its whole gradient to the cell of its maximum.
template <class T>
struct MaxShare {
  const T* grad_out;
  const int64_t* indices;
  EMBER_HOST_DEVICE T operator()(int64_t o, const Window&, int64_t cell) const {
    return indices[o] == cell ? grad_out[o] : T(0);
  }
};

// The averages' backward: a window sends its gradient over its divisor to every cell it covers.
template <class T>
struct AverageShare {
  const T* grad_out;
  EMBER_HOST_DEVICE T operator()(int64_t o, const Window& win, int64_t) const {
    return grad_out[o] / static_cast<T>(win.divisor);
  }
};

}  // namespace ember::pooling
