// CPU pooling kernels: max (recording the argmax of each window), average, adaptive average.
//
// Note [Pooling by planes]
// Every window lies inside one (n, c) plane, so each kernel hands whole planes to the threads:
// a backward that scatters into its plane (max, and the average backwards, whose windows may
// overlap) never races with another thread. Average and adaptive average differ only in where
// a window lies and what divides its sum, so both run the same two loops with a different
// window rule (PoolWindows, AdaptiveWindows).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using kernels::Window2d;

// Input rows [h0, h1) and columns [w0, w1) of one window, clipped to the image.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;  // what an average divides the window's sum by
};

// Strided, padded windows (max_pool2d, avg_pool2d).
struct PoolWindows {
  const Window2d& g;
  bool count_include_pad;
  Window operator()(int64_t oh, int64_t ow) const {
    const int64_t h = oh * g.sh - g.ph, w = ow * g.sw - g.pw;
    Window win{std::max<int64_t>(h, 0), std::min(h + g.kh, g.h), std::max<int64_t>(w, 0), std::min(w + g.kw, g.w), 0};
    // Without ceil_mode a window never reaches past the padding, so it always covers kh * kw cells.
    win.divisor = count_include_pad ? g.kh * g.kw : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
};

// adaptive_avg_pool2d: cell i of `out` covers [floor(i * in / out), ceil((i + 1) * in / out)).
struct AdaptiveWindows {
  const Window2d& g;
  Window operator()(int64_t oh, int64_t ow) const {
    auto begin = [](int64_t i, int64_t in, int64_t out) { return i * in / out; };
    auto end = [](int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; };
    Window win{begin(oh, g.h, g.oh), end(oh, g.h, g.oh), begin(ow, g.w, g.ow), end(ow, g.w, g.ow), 0};
    win.divisor = (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
};

// Runs fn(p) for every (n, c) plane p over the thread team.
template <class Fn>
void for_each_plane(const Window2d& g, Fn fn) {
  parallel_for(g.n * g.c, g.n * g.c * (g.h * g.w + g.oh * g.ow), fn);
}

// Calls visit(o, window) for every output cell o (flat oh * ow + ow) of a plane.
template <class Windows, class Visit>
void for_each_window(const Window2d& g, const Windows& windows, Visit visit) {
  for (int64_t oh = 0; oh < g.oh; ++oh)
    for (int64_t ow = 0; ow < g.ow; ++ow) visit(oh * g.ow + ow, windows(oh, ow));
}

void max_pool2d_forward_cpu(const Tensor& x, const Window2d& g, const Tensor& out, const Tensor& indices) {
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    int64_t* pi = indices.data<int64_t>();
    for_each_plane(g, [&](int64_t p) {
      const T* src = px + p * g.h * g.w;
      T* dst = po + p * g.oh * g.ow;
      int64_t* arg = pi + p * g.oh * g.ow;
      for_each_window(g, PoolWindows{g, false}, [&](int64_t o, const Window& win) {
        T best = -std::numeric_limits<T>::infinity();
        int64_t at = win.h0 * g.w + win.w0;
        for (int64_t h = win.h0; h < win.h1; ++h) {
          for (int64_t w = win.w0; w < win.w1; ++w) {
            const T v = src[h * g.w + w];
            if (v > best || std::isnan(v)) {  // the first maximum wins; NaN propagates, as PyTorch
              best = v;
              at = h * g.w + w;
            }
          }
        }
        dst[o] = best;
        arg[o] = at;
      });
    });
  });
}

void max_pool2d_backward_cpu(const Tensor& grad_out, const Tensor& indices, const Window2d& g,
                             const Tensor& grad_x) {
  dispatch_floating(grad_out.dtype(), "max_pool2d", [&]<class T>() {
    const T* pg = grad_out.data<T>();
    const int64_t* pi = indices.data<int64_t>();
    T* px = grad_x.data<T>();
    for_each_plane(g, [&](int64_t p) {
      const int64_t cells = g.oh * g.ow;
      T* dst = px + p * g.h * g.w;
      for (int64_t o = p * cells; o < (p + 1) * cells; ++o) dst[pi[o]] += pg[o];
    });
  });
}

template <class Windows>
void average_forward(const Tensor& x, const Window2d& g, const Windows& windows, const Tensor& out) {
  dispatch_floating(x.dtype(), "average pooling", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_each_plane(g, [&](int64_t p) {
      const T* src = px + p * g.h * g.w;
      T* dst = po + p * g.oh * g.ow;
      for_each_window(g, windows, [&](int64_t o, const Window& win) {
        double sum = 0;
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) sum += src[h * g.w + w];
        dst[o] = static_cast<T>(sum / static_cast<double>(win.divisor));
      });
    });
  });
}

// Writes every element of grad_x: each plane is cleared, then each window adds its share.
template <class Windows>
void average_backward(const Tensor& grad_out, const Window2d& g, const Windows& windows, const Tensor& grad_x) {
  dispatch_floating(grad_out.dtype(), "average pooling", [&]<class T>() {
    const T* pg = grad_out.data<T>();
    T* px = grad_x.data<T>();
    for_each_plane(g, [&](int64_t p) {
      const T* src = pg + p * g.oh * g.ow;
      T* dst = px + p * g.h * g.w;
      std::fill(dst, dst + g.h * g.w, T(0));
      for_each_window(g, windows, [&](int64_t o, const Window& win) {
        const T share = src[o] / static_cast<T>(win.divisor);
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) dst[h * g.w + w] += share;
      });
    });
  });
}

void avg_pool2d_forward_cpu(const Tensor& x, const Window2d& g, bool count_include_pad, const Tensor& out) {
  average_forward(x, g, PoolWindows{g, count_include_pad}, out);
}

void avg_pool2d_backward_cpu(const Tensor& grad_out, const Window2d& g, bool count_include_pad,
                             const Tensor& grad_x) {
  average_backward(grad_out, g, PoolWindows{g, count_include_pad}, grad_x);
}

void adaptive_avg_pool2d_forward_cpu(const Tensor& x, const Window2d& g, const Tensor& out) {
  average_forward(x, g, AdaptiveWindows{g}, out);
}

void adaptive_avg_pool2d_backward_cpu(const Tensor& grad_out, const Window2d& g, const Tensor& grad_x) {
  average_backward(grad_out, g, AdaptiveWindows{g}, grad_x);
}

const bool registered =
    kernels::add_kernel(kernels::max_pool2d_forward, DeviceType::CPU, &max_pool2d_forward_cpu) &&
    kernels::add_kernel(kernels::max_pool2d_backward, DeviceType::CPU, &max_pool2d_backward_cpu) &&
    kernels::add_kernel(kernels::avg_pool2d_forward, DeviceType::CPU, &avg_pool2d_forward_cpu) &&
    kernels::add_kernel(kernels::avg_pool2d_backward, DeviceType::CPU, &avg_pool2d_backward_cpu) &&
    kernels::add_kernel(kernels::adaptive_avg_pool2d_forward, DeviceType::CPU, &adaptive_avg_pool2d_forward_cpu) &&
    kernels::add_kernel(kernels::adaptive_avg_pool2d_backward, DeviceType::CPU, &adaptive_avg_pool2d_backward_cpu);

}  // namespace
}  // namespace ember::cpu
