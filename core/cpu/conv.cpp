// CPU convolution: im2col + gemm, one sample at a time (see Note [Convolution as im2col + gemm]
// in core/ops/conv.cpp): the reference. With ConvBackend::OneDNN (core/ops.h) the kernels hand
// the cases oneDNN takes to it (Note [Convolution through oneDNN]).
//
// Note [Convolution by samples]
// The batch is split between the threads in fixed blocks, and each thread runs its samples one
// by one: im2col of one sample into the thread's own column buffer, then a single-threaded gemm
// that reads the columns while they are still in cache. Lowering the whole batch first and then
// running one threaded gemm per sample would instead
//  - hold columns for all N samples at once: N x C*KH*KW x OH*OW, about 9x the input at a 3x3
//    kernel, and the largest buffer of a conv network (58 MB per layer for ResNet-20 at batch
//    128), where this holds one sample's columns per thread;
//  - wake the thread team for every small gemm, where this wakes it once per conv;
//  - materialise N per-sample weight gradients and then sum them, where each thread here adds
//    g_n @ cols_n^T into its own partial sum (gemm with beta = 1) and the partials are added in
//    thread order.
// The blocks depend only on N and the thread count, so results are bitwise reproducible for a
// given thread count. With fewer samples than threads (one image at inference), the samples run
// in turn and BLAS spreads each gemm over the team instead.
// The column buffers come from ember's allocator, so the memory statistics count them.
//
// Note [im2col by planes]
// Input plane c feeds exactly the kh*kw rows c*kh*kw ... of one sample's columns [C*KH*KW, OH*OW],
// and col2im writes plane c only from those rows. Inside a row, the range of outputs whose input
// lies inside the image is computed once (Span), so the hot loop has no bounds checks and, at
// stride 1, is a plain copy (or add) the compiler vectorises.
#include <omp.h>

#include <algorithm>

#include "core/cpu/blas.h"
#include "core/cpu/dnnl_conv.h"
#include "core/kernels.h"
#include "core/ops.h"

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

// Walks one plane's kh*kw column rows (flat index `at` into them). For each stretch of outputs
// whose input lies inside the image it calls inside_run(at, in, count): outputs at .. at+count-1
// see the inputs in, in + sw, ... (flat in the plane); every other range gets padding(begin, end).
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

// Note [im2col in blocks]
// At stride 1 with an output as wide as the input (3x3 kernels with padding 1: most of a
// ResNet), a tap reads consecutive input rows, and input and column rows have the same length.
// Column cell p of tap (i, j) then reads input cell p + shift with one shift for the whole tap,
// so the tap is one copy from its first inside cell to its last; the cells of that stretch that
// belong to the padding (a neighbouring row's edge) are zeroed afterwards. One copy of ~700
// floats instead of a call per row of 27: im2col and its memmoves were a large part of a ResNet
// step (bench/RESULTS.md, "Convolution by samples").
template <class T>
void im2col_plane_in_blocks(const T* src, const Window2d& g, T* dst) {
  const int64_t cells = g.oh * g.ow;
  for (int64_t i = 0; i < g.kh; ++i) {
    const Span rows = inside(i * g.dh - g.ph, 1, g.h, g.oh);
    for (int64_t j = 0; j < g.kw; ++j) {
      T* tap = dst + (i * g.kw + j) * cells;
      const int64_t offset = j * g.dw - g.pw;
      const Span cols = inside(offset, 1, g.w, g.ow);
      std::fill(tap, tap + rows.lo * g.ow, T(0));
      std::fill(tap + rows.hi * g.ow, tap + cells, T(0));
      if (cols.lo == cols.hi) {
        std::fill(tap + rows.lo * g.ow, tap + rows.hi * g.ow, T(0));
        continue;
      }
      if (rows.lo == rows.hi) continue;
      const int64_t first = rows.lo * g.ow + cols.lo, last = (rows.hi - 1) * g.ow + cols.hi;
      const int64_t shift = (i * g.dh - g.ph) * g.w + offset;
      std::copy(src + first + shift, src + last + shift, tap + first);
      // column by column: strided stores, which the compiler keeps inline (a row-wise zeroing
      // loop would become a memset call per row)
      for (int64_t k = 0; k < cols.lo; ++k)
        for (int64_t o = rows.lo; o < rows.hi; ++o) tap[o * g.ow + k] = T(0);
      for (int64_t k = cols.hi; k < g.ow; ++k)
        for (int64_t o = rows.lo; o < rows.hi; ++o) tap[o * g.ow + k] = T(0);
    }
  }
}

// One sample [C, H, W] -> its columns [C*KH*KW, OH*OW], zeros where the window hangs over the padding.
template <class T>
void im2col(const T* x, const Window2d& g, T* cols) {
  const int64_t plane_cols = g.kh * g.kw * g.oh * g.ow;
  const bool in_blocks = g.sh == 1 && g.sw == 1 && g.ow == g.w;
  for (int64_t c = 0; c < g.c; ++c) {
    const T* src = x + c * g.h * g.w;
    T* dst = cols + c * plane_cols;
    if (in_blocks) {
      im2col_plane_in_blocks(src, g, dst);
      continue;
    }
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
  }
}

// The adjoint: x [C, H, W] = the sum of the column entries that read each input cell.
template <class T>
void col2im(const T* cols, const Window2d& g, T* x) {
  const int64_t plane_cols = g.kh * g.kw * g.oh * g.ow;
  std::fill(x, x + g.c * g.h * g.w, T(0));
  for (int64_t c = 0; c < g.c; ++c) {
    const T* src = cols + c * plane_cols;
    T* dst = x + c * g.h * g.w;
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
  }
}

// A 1x1 kernel at stride 1 without padding: a sample's input [C, H*W] already is its columns.
bool is_pointwise(const Window2d& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// A sample's columns: the sample itself when pointwise, else im2col into `scratch`.
template <class T>
const T* columns(const T* sample, const Window2d& g, T* scratch) {
  if (is_pointwise(g)) return sample;
  im2col(sample, g, scratch);
  return scratch;
}

// How the batch is spread (Note [Convolution by samples]): `workers` blocks of samples, each
// with a scratch area of `scratch_elems` elements from ember's allocator.
class SampleSplit {
 public:
  SampleSplit(int64_t samples, int64_t scratch_elems, DType dtype) : samples_(samples) {
    const int threads = omp_get_max_threads();
    workers_ = threads > 1 && samples >= threads ? threads : 1;
    if (scratch_elems > 0) scratch_ = empty({workers_, scratch_elems}, TensorOptions(dtype));
  }
  int64_t workers() const { return workers_; }
  template <class T>
  T* scratch(int64_t worker) const {
    return scratch_.defined() ? scratch_.data<T>() + worker * scratch_.size(1) : nullptr;
  }

  // Runs body(worker, sample) for every sample, worker w taking the w-th block.
  template <class Body>
  void run(Body body) const {
    const auto block = [&](int64_t w) {
      for (int64_t s = w * samples_ / workers_; s < (w + 1) * samples_ / workers_; ++s) body(w, s);
    };
    if (workers_ == 1) {
      block(0);
      return;
    }
#pragma omp parallel for num_threads(static_cast<int>(workers_)) schedule(static, 1)
    for (int64_t w = 0; w < workers_; ++w) block(w);
  }

 private:
  int64_t samples_, workers_;
  Tensor scratch_;
};

bool use_onednn() { return conv_backend() == ConvBackend::OneDNN; }

// The kernels are registered for bfloat16 (Note [Convolution through oneDNN]): oneDNN computes on
// it where the CPU has AVX512-BF16; otherwise the im2col kernel runs staged through float32.
void conv2d_forward_cpu(const Tensor& x, const Tensor& weight, const Window2d& g, const Tensor& out) {
  if (use_onednn() && conv2d_forward_dnnl(x, weight, g, out)) return;
  if (x.dtype() == kBFloat16) return kernels::conv2d_forward.staged(&conv2d_forward_cpu, x, weight, g, out);
  const int64_t oc = weight.size(0), ck = weight.size(1), cells = g.oh * g.ow;
  const SampleSplit split(g.n, is_pointwise(g) ? 0 : ck * cells, x.dtype());
  dispatch_floating(x.dtype(), "conv2d", [&]<class T>() {
    const T *px = x.data<T>(), *pw = weight.data<T>();
    T* po = out.data<T>();
    split.run([&](int64_t w, int64_t s) {
      const T* cols = columns(px + s * g.c * g.h * g.w, g, split.scratch<T>(w));
      gemm(false, false, oc, cells, ck, pw, ck, cols, cells, T(0), po + s * oc * cells, cells);
    });
  });
}

void input_gradient(const Tensor& grad, const Tensor& weight, const Window2d& g, const Tensor& grad_x) {
  const int64_t oc = weight.size(0), ck = weight.size(1), cells = g.oh * g.ow, plane = g.c * g.h * g.w;
  const bool pointwise = is_pointwise(g);
  const SampleSplit split(g.n, pointwise ? 0 : ck * cells, grad.dtype());
  dispatch_floating(grad.dtype(), "conv2d backward", [&]<class T>() {
    const T *pg = grad.data<T>(), *pw = weight.data<T>();
    T* px = grad_x.data<T>();
    split.run([&](int64_t w, int64_t s) {
      // the columns' gradient W^T @ g_s, added back onto the input (it is the input's, if pointwise)
      T* cols = pointwise ? px + s * plane : split.scratch<T>(w);
      gemm(true, false, ck, cells, oc, pw, ck, pg + s * oc * cells, cells, T(0), cols, cells);
      if (!pointwise) col2im(cols, g, px + s * plane);
    });
  });
}

void weight_gradient(const Tensor& grad, const Tensor& x, const Window2d& g, const Tensor& grad_weight) {
  const int64_t oc = grad_weight.size(0), ck = grad_weight.size(1), cells = g.oh * g.ow, size = oc * ck;
  // A worker's scratch: its partial sum of the weight gradient, then a sample's columns.
  const SampleSplit split(g.n, size + (is_pointwise(g) ? 0 : ck * cells), x.dtype());
  dispatch_floating(x.dtype(), "conv2d backward", [&]<class T>() {
    const T *pg = grad.data<T>(), *px = x.data<T>();
    for (int64_t w = 0; w < split.workers(); ++w) std::fill_n(split.scratch<T>(w), size, T(0));
    split.run([&](int64_t w, int64_t s) {
      T* partial = split.scratch<T>(w);
      const T* cols = columns(px + s * g.c * g.h * g.w, g, partial + size);
      gemm(false, true, oc, ck, cells, pg + s * oc * cells, cells, cols, cells, T(1), partial, ck);
    });
    T* pgw = grad_weight.data<T>();
    std::copy_n(split.scratch<T>(0), size, pgw);
    for (int64_t w = 1; w < split.workers(); ++w) {
      const T* partial = split.scratch<T>(w);
      for (int64_t i = 0; i < size; ++i) pgw[i] += partial[i];
    }
  });
}

void conv2d_backward_cpu(const Tensor& grad, const Tensor& x, const Tensor& weight, const Window2d& g,
                         const Tensor& grad_x, const Tensor& grad_weight) {
  if (use_onednn() && conv2d_backward_dnnl(grad, x, weight, g, grad_x, grad_weight)) return;
  if (grad.dtype() == kBFloat16)
    return kernels::conv2d_backward.staged(&conv2d_backward_cpu, grad, x, weight, g, grad_x, grad_weight);
  if (grad_x.defined()) input_gradient(grad, weight, g, grad_x);
  if (grad_weight.defined()) weight_gradient(grad, x, g, grad_weight);
}

const bool registered =
    kernels::add_kernel(kernels::conv2d_forward, DeviceType::CPU, &conv2d_forward_cpu, kernels::SixteenBit::BFloat16) &&
    kernels::add_kernel(kernels::conv2d_backward, DeviceType::CPU, &conv2d_backward_cpu, kernels::SixteenBit::BFloat16);

}  // namespace
}  // namespace ember::cpu
