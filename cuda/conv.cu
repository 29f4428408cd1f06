// CUDA convolution: im2col + cuBLAS (Note [Convolution as im2col + gemm] in core/ops/conv.cpp).
//
// Note [CUDA convolution]
// Unlike the CPU kernels, which lower one sample per thread at a time (Note [Convolution by
// samples]), these lower the whole batch at once and hand the products to cuBLAS in one call.
//  - Forward: columns [N, C*KH*KW, OH*OW], and one strided-batched product with the weight
//    broadcast over the batch as a stride-0 view.
//  - Input gradient: the columns' gradient W^T @ g_n, batched the same way, then col2im, which
//    gathers: each thread owns one input cell and adds the column entries that read it, in a
//    fixed order, so no atomics are needed and the result is the same on every run.
//  - Weight gradient: sum_n g_n @ cols_n^T is one product over the whole batch, g as [OC, N*OH*OW]
//    times cols as [C*KH*KW, N*OH*OW] transposed: im2col writes its columns in that layout
//    directly (ColumnLayout in core/kernel_bodies/im2col.h) and g is permuted once, which is
//    smaller than the columns. A batch whose N*OH*OW is past cuBLAS's int range is cut into
//    chunks of samples, whose products the reduce kernel adds.
// The columns are a temporary of the kernel (9x the input for a 3x3 kernel; 58 MB for a
// ResNet-20 layer at batch 128), counted by the device allocator and freed when it returns. The
// per-thread bodies and their index arithmetic are core/kernel_bodies/im2col.h (Note [im2col
// indexing]).
#include <limits>

#include "core/kernel_bodies/im2col.h"
#include "core/kernels.h"
#include "cuda/cudnn/api.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::Window2d;

Tensor device_empty(const Shape& shape, const Tensor& like) {
  return empty(shape, TensorOptions(like.dtype()).with_device(like.device()));
}

// Runs launch.template operator()<I>() with I = int32_t when every index of tensors of `largest`
// elements fits in it, else int64_t (Note [im2col indexing]).
template <class Launch>
void with_index_type(int64_t largest, const Launch& launch) {
  if (largest <= std::numeric_limits<int32_t>::max())
    launch.template operator()<int32_t>();
  else
    launch.template operator()<int64_t>();
}

// The columns of samples x[0 .. g.n) (a pointer into a batch) in the given layout.
template <class T>
void im2col(const T* x, const Window2d& g, int64_t sample_stride, int64_t row_stride, const Tensor& cols) {
  with_index_type(std::max(cols.numel(), g.n * g.c * g.h * g.w), [&]<class I>() {
    const conv_bodies::ColumnLayout<I> layout{static_cast<I>(sample_stride), static_cast<I>(row_stride)};
    for_each(cols.device(), g.n * g.c * g.oh * g.ow,
             conv_bodies::Im2colBody<T, I>{x, conv_bodies::Geometry<I>::from(g), layout, cols.data<T>()});
  });
}

void conv2d_forward_cuda(const Tensor& x, const Tensor& weight, const Window2d& g, const Tensor& out) {
  if (cudnn::conv2d_forward(x, weight, g, out)) return;  // Note [cuDNN or ember's kernels]
  const int64_t oc = weight.size(0), ck = weight.size(1), cells = g.oh * g.ow;
  Tensor cols = device_empty({g.n, ck, cells}, x);
  dispatch_floating(x.dtype(), "conv2d", [&]<class T>() { im2col(x.data<T>(), g, ck * cells, cells, cols); });
  kernels::matmul[x.device()](weight.unsqueeze(0).expand({g.n, oc, ck}), cols, out, false);
}

void input_gradient(const Tensor& grad, const Tensor& weight, const Window2d& g, const Tensor& grad_x) {
  if (cudnn::conv2d_backward_input(grad, weight, g, grad_x)) return;
  const int64_t oc = weight.size(0), ck = weight.size(1), cells = g.oh * g.ow;
  Tensor cols = device_empty({g.n, ck, cells}, grad);
  kernels::matmul[grad.device()](weight.t().unsqueeze(0).expand({g.n, ck, oc}), grad, cols, false);
  dispatch_floating(grad.dtype(), "conv2d backward", [&]<class T>() {
    with_index_type(std::max(cols.numel(), grad_x.numel()), [&]<class I>() {
      const conv_bodies::Geometry<I> geometry = conv_bodies::Geometry<I>::from(g);
      const conv_bodies::Col2imBody<T, I> body{cols.data<T>(),
                                        geometry,
                                        {static_cast<I>(ck * cells), static_cast<I>(cells)},
                                        conv_bodies::TapStep<I>::of(geometry.sh, geometry.dh),
                                        conv_bodies::TapStep<I>::of(geometry.sw, geometry.dw),
                                        grad_x.data<T>()};
      for_each(grad.device(), grad_x.numel(), body);
    });
  });
}

// grad_weight [oc, ck] (a view) = sum over samples [n0, n0 + count) of g_n @ cols_n^T, one product.
void weight_gradient_of_samples(const Tensor& grad, const Tensor& x, Window2d g, int64_t n0, int64_t count,
                                const Tensor& grad_weight) {
  const int64_t oc = grad_weight.size(0), ck = grad_weight.size(1), cells = g.oh * g.ow;
  g.n = count;
  Tensor cols = device_empty({ck, count * cells}, x);  // [C*KH*KW, N*OH*OW], see the Note
  Tensor g_rows = device_empty({oc, count, cells}, grad);
  kernels::copy[grad.device()](grad.narrow(0, n0, count).permute({1, 0, 2}), g_rows);
  dispatch_floating(x.dtype(), "conv2d backward", [&]<class T>() {
    im2col(x.data<T>() + n0 * g.c * g.h * g.w, g, cells, count * cells, cols);
  });
  kernels::matmul[grad.device()](g_rows.view({1, oc, count * cells}), cols.unsqueeze(0).transpose(1, 2),
                                 grad_weight.unsqueeze(0), false);
}

void weight_gradient(const Tensor& grad, const Tensor& x, const Window2d& g, const Tensor& grad_weight) {
  if (cudnn::conv2d_backward_weight(grad, x, g, grad_weight)) return;
  const int64_t oc = grad_weight.size(0), ck = grad_weight.size(1), cells = g.oh * g.ow;
  // cuBLAS's k = samples * cells must be an int (a single sample past that is the matmul's error)
  const int64_t per_product = std::max<int64_t>(1, std::numeric_limits<int>::max() / std::max<int64_t>(cells, 1));
  if (g.n <= per_product) return weight_gradient_of_samples(grad, x, g, 0, g.n, grad_weight);
  const int64_t chunks = (g.n + per_product - 1) / per_product;
  Tensor partial = device_empty({chunks, oc, ck}, grad);
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t n0 = k * per_product;
    weight_gradient_of_samples(grad, x, g, n0, std::min(per_product, g.n - n0), partial.select(0, k));
  }
  kernels::reduce[grad.device()](kernels::ReduceOp::Sum, partial, 1, chunks, oc * ck, grad_weight);
}

void conv2d_backward_cuda(const Tensor& grad, const Tensor& x, const Tensor& weight, const Window2d& g,
                          const Tensor& grad_x, const Tensor& grad_weight) {
  if (grad_x.defined()) input_gradient(grad, weight, g, grad_x);
  if (grad_weight.defined()) weight_gradient(grad, x, g, grad_weight);
}

const bool registered =
    kernels::add_kernel(kernels::conv2d_forward, DeviceType::CUDA, &conv2d_forward_cuda) &&
    kernels::add_kernel(kernels::conv2d_backward, DeviceType::CUDA, &conv2d_backward_cuda);

}  // namespace
}  // namespace ember::cuda
