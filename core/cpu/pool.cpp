// CPU pooling kernels: max (recording the argmax of each window), average, adaptive average.
//
// Note [Pooling by planes]
// Every window lies inside one (n, c) plane, so each kernel hands whole planes to the threads:
// a backward that scatters into its plane (max, and the average backwards, whose windows may
// overlap) never races with another thread. Average and adaptive average differ only in where
// a window lies and what divides its sum, so both run the same two loops with a different
// window rule (PoolWindows, AdaptiveWindows in core/kernel_bodies/pool_windows.h, shared with the CUDA kernels).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cpu/parallel.h"
#include "core/kernel_bodies/pool_windows.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using kernels::Window2d;
using pooling::AdaptiveWindows;
using pooling::PoolWindows;
using pooling::Window;

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
        const pooling::WindowMax<T> best = pooling::window_max(src, g.w, win);
        dst[o] = best.value;
        arg[o] = best.at;
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
      for_each_window(g, windows, [&](int64_t o, const Window& win) { dst[o] = pooling::window_average(src, g.w, win); });
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
