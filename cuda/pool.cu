// CUDA pooling kernels, with the semantics of core/cpu/pool.cpp: max (recording the argmax of
// each window), average and adaptive average, forward and backward.
//
// Note [Pooling backward by gathering]
// The CPU backward scatters: each window adds its gradient into the input cells it covers. On
// the GPU that would need atomics, whose order, and so whose rounding, changes from run to run.
// Here each thread owns one input cell and gathers instead: it visits the windows that can
// cover its cell in increasing output order and adds what each one sends to it. That is the
// order the CPU adds in, so the results are bitwise the CPU's. The candidate windows come from
// inverting the window rule; each candidate is then checked with the forward's own rule, so the
// inversion only has to include every covering window, never to be exact.
#include <cmath>

#include "core/kernels.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::Window2d;

// Input rows [h0, h1) and columns [w0, w1) of one window, clipped to the image.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;  // what an average divides the window's sum by
};

// A range of output indices [lo, hi] (inclusive) whose windows may cover one input index.
struct Candidates {
  int64_t lo, hi;
};

// Strided, padded windows (max_pool2d, avg_pool2d).
struct PoolWindows {
  Window2d g;
  bool count_include_pad;
  __device__ Window operator()(int64_t oh, int64_t ow) const {
    const int64_t h = oh * g.sh - g.ph, w = ow * g.sw - g.pw;
    Window win{::max(h, int64_t{0}), ::min(h + g.kh, g.h), ::max(w, int64_t{0}), ::min(w + g.kw, g.w), 0};
    win.divisor = count_include_pad ? g.kh * g.kw : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  // Window o starts at o * stride - pad and spans `kernel`: it covers i iff
  // (i + pad - kernel + 1) / stride <= o <= (i + pad) / stride.
  __device__ static Candidates along(int64_t i, int64_t kernel, int64_t stride, int64_t pad, int64_t out) {
    return {::max((i + pad - kernel) / stride, int64_t{0}), ::min((i + pad) / stride, out - 1)};
  }
  __device__ Candidates rows(int64_t h) const { return along(h, g.kh, g.sh, g.ph, g.oh); }
  __device__ Candidates cols(int64_t w) const { return along(w, g.kw, g.sw, g.pw, g.ow); }
};

// adaptive_avg_pool2d: cell o of `out` covers [floor(o * in / out), ceil((o + 1) * in / out)).
struct AdaptiveWindows {
  Window2d g;
  __device__ static int64_t begin(int64_t o, int64_t in, int64_t out) { return o * in / out; }
  __device__ static int64_t end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }
  __device__ Window operator()(int64_t oh, int64_t ow) const {
    Window win{begin(oh, g.h, g.oh), end(oh, g.h, g.oh), begin(ow, g.w, g.ow), end(ow, g.w, g.ow), 0};
    win.divisor = (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  // Cell o covers i iff floor(i * out / in) <= o <= ceil((i + 1) * out / in) - 1.
  __device__ static Candidates along(int64_t i, int64_t in, int64_t out) {
    return {i * out / in, ::min(((i + 1) * out + in - 1) / in - 1, out - 1)};
  }
  __device__ Candidates rows(int64_t h) const { return along(h, g.h, g.oh); }
  __device__ Candidates cols(int64_t w) const { return along(w, g.w, g.ow); }
};

template <class T>
struct MaxPoolForwardBody {
  const T* x;
  PoolWindows windows;
  T* out;
  int64_t* indices;
  __device__ void operator()(int64_t i) const {
    const Window2d& g = windows.g;
    const int64_t cells = g.oh * g.ow, plane = i / cells, o = i % cells;
    const T* src = x + plane * g.h * g.w;
    const Window win = windows(o / g.ow, o % g.ow);
    T best = -INFINITY;
    int64_t at = win.h0 * g.w + win.w0;
    for (int64_t h = win.h0; h < win.h1; ++h) {
      for (int64_t w = win.w0; w < win.w1; ++w) {
        const T v = src[h * g.w + w];
        if (v > best || isnan(v)) {  // the first maximum wins; NaN propagates
          best = v;
          at = h * g.w + w;
        }
      }
    }
    out[i] = best;
    indices[i] = at;
  }
};

void max_pool2d_forward_cuda(const Tensor& x, const Window2d& g, const Tensor& out, const Tensor& indices) {
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    for_each(x.device(), out.numel(),
             MaxPoolForwardBody<T>{x.data<T>(), PoolWindows{g, false}, out.data<T>(), indices.data<int64_t>()});
  });
}

// Input cell i of grad_x gathers from the windows that cover it (see the Note); `share(o, win,
// cell)` is what window o sends to `cell` (flat h * w + w in the plane).
template <class T, class Windows, class Share>
struct GatherBody {
  Windows windows;
  Share share;
  T* grad_x;
  bool accumulate;  // max pooling adds to grad_x (zero-filled by the caller); averages write it
  __device__ void operator()(int64_t i) const {
    const Window2d& g = windows.g;
    const int64_t plane = i / (g.h * g.w), cell = i % (g.h * g.w), h = cell / g.w, w = cell % g.w;
    const Candidates rows = windows.rows(h), cols = windows.cols(w);
    T sum = accumulate ? grad_x[i] : T(0);
    for (int64_t oh = rows.lo; oh <= rows.hi; ++oh) {
      for (int64_t ow = cols.lo; ow <= cols.hi; ++ow) {
        const Window win = windows(oh, ow);
        if (h < win.h0 || h >= win.h1 || w < win.w0 || w >= win.w1) continue;
        sum += share(plane * g.oh * g.ow + oh * g.ow + ow, win, cell);
      }
    }
    grad_x[i] = sum;
  }
};

template <class T>
struct MaxShare {
  const T* grad_out;
  const int64_t* indices;
  __device__ T operator()(int64_t o, const Window&, int64_t cell) const {
    return indices[o] == cell ? grad_out[o] : T(0);
  }
};

template <class T>
struct AverageShare {
  const T* grad_out;
  __device__ T operator()(int64_t o, const Window& win, int64_t) const {
    return grad_out[o] / static_cast<T>(win.divisor);
  }
};

void max_pool2d_backward_cuda(const Tensor& grad_out, const Tensor& indices, const Window2d& g,
                              const Tensor& grad_x) {
  dispatch_floating(grad_out.dtype(), "max_pool2d", [&]<class T>() {
    using Body = GatherBody<T, PoolWindows, MaxShare<T>>;
    for_each(grad_x.device(), grad_x.numel(),
             Body{PoolWindows{g, false}, MaxShare<T>{grad_out.data<T>(), indices.data<int64_t>()}, grad_x.data<T>(),
                  true});
  });
}

template <class T, class Windows>
struct AverageForwardBody {
  const T* x;
  Windows windows;
  T* out;
  __device__ void operator()(int64_t i) const {
    const Window2d& g = windows.g;
    const int64_t cells = g.oh * g.ow, plane = i / cells, o = i % cells;
    const T* src = x + plane * g.h * g.w;
    const Window win = windows(o / g.ow, o % g.ow);
    double sum = 0;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) sum += src[h * g.w + w];
    out[i] = static_cast<T>(sum / static_cast<double>(win.divisor));
  }
};

template <class Windows>
void average_forward(const Tensor& x, const Windows& windows, const Tensor& out) {
  dispatch_floating(x.dtype(), "average pooling", [&]<class T>() {
    for_each(x.device(), out.numel(), AverageForwardBody<T, Windows>{x.data<T>(), windows, out.data<T>()});
  });
}

template <class Windows>
void average_backward(const Tensor& grad_out, const Windows& windows, const Tensor& grad_x) {
  dispatch_floating(grad_out.dtype(), "average pooling", [&]<class T>() {
    using Body = GatherBody<T, Windows, AverageShare<T>>;
    for_each(grad_x.device(), grad_x.numel(), Body{windows, AverageShare<T>{grad_out.data<T>()}, grad_x.data<T>(), false});
  });
}

void avg_pool2d_forward_cuda(const Tensor& x, const Window2d& g, bool count_include_pad, const Tensor& out) {
  average_forward(x, PoolWindows{g, count_include_pad}, out);
}

void avg_pool2d_backward_cuda(const Tensor& grad_out, const Window2d& g, bool count_include_pad,
                              const Tensor& grad_x) {
  average_backward(grad_out, PoolWindows{g, count_include_pad}, grad_x);
}

void adaptive_avg_pool2d_forward_cuda(const Tensor& x, const Window2d& g, const Tensor& out) {
  average_forward(x, AdaptiveWindows{g}, out);
}

void adaptive_avg_pool2d_backward_cuda(const Tensor& grad_out, const Window2d& g, const Tensor& grad_x) {
  average_backward(grad_out, AdaptiveWindows{g}, grad_x);
}

const bool registered =
    kernels::add_kernel(kernels::max_pool2d_forward, DeviceType::CUDA, &max_pool2d_forward_cuda) &&
    kernels::add_kernel(kernels::max_pool2d_backward, DeviceType::CUDA, &max_pool2d_backward_cuda) &&
    kernels::add_kernel(kernels::avg_pool2d_forward, DeviceType::CUDA, &avg_pool2d_forward_cuda) &&
    kernels::add_kernel(kernels::avg_pool2d_backward, DeviceType::CUDA, &avg_pool2d_backward_cuda) &&
    kernels::add_kernel(kernels::adaptive_avg_pool2d_forward, DeviceType::CUDA, &adaptive_avg_pool2d_forward_cuda) &&
    kernels::add_kernel(kernels::adaptive_avg_pool2d_backward, DeviceType::CUDA, &adaptive_avg_pool2d_backward_cuda);

}  // namespace
}  // namespace ember::cuda
