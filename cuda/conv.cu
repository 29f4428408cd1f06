// CUDA convolution: im2col + cuBLAS (Note [Convolution as im2col + gemm] in core/ops/conv.cpp).
//
// Note [CUDA convolution]
// Unlike the CPU kernels, which lower one sample per thread at a time (Note [Convolution by
// samples]), these lower the whole batch at once into columns [N, C*KH*KW, OH*OW] and hand the
// products to the matmul kernel as one strided-batched cuBLAS call, the weight broadcast over the
// batch with a stride-0 view. The columns are a temporary of the kernel (9x the input for a 3x3
// kernel; 58 MB for a ResNet-20 layer at batch 128), counted by the device allocator and freed
// when the kernel returns. col2im gathers: each thread owns one input cell and adds the column
// entries that read it, in a fixed order, so no atomics are needed and the result is the same on
// every run. The weight gradient is the batch of per-sample products g_n @ cols_n^T summed over
// n by the reduce kernel.
#include "core/kernels.h"
#include "cuda/cudnn.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::Window2d;

// cols[n, (c*kh + i)*kw + j, oh*ow + o] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], or 0 in the padding.
template <class T>
struct Im2colBody {
  const T* x;
  Window2d g;
  T* cols;
  __device__ void operator()(int64_t e) const {
    const int64_t cells = g.oh * g.ow, o = e % cells, row = (e / cells) % (g.c * g.kh * g.kw);
    const int64_t n = e / (cells * g.c * g.kh * g.kw);
    const int64_t c = row / (g.kh * g.kw), i = row / g.kw % g.kh, j = row % g.kw;
    const int64_t h = o / g.ow * g.sh - g.ph + i * g.dh, w = o % g.ow * g.sw - g.pw + j * g.dw;
    const bool inside = h >= 0 && h < g.h && w >= 0 && w < g.w;
    cols[e] = inside ? x[((n * g.c + c) * g.h + h) * g.w + w] : T(0);
  }
};

// grad_x[n, c, h, w] = the sum of the column entries that read (h, w), over the taps (i, j) in order.
template <class T>
struct Col2imBody {
  const T* cols;
  Window2d g;
  T* grad_x;
  __device__ void operator()(int64_t e) const {
    const int64_t w = e % g.w, h = e / g.w % g.h, c = e / (g.w * g.h) % g.c, n = e / (g.w * g.h * g.c);
    const int64_t cells = g.oh * g.ow;
    const T* sample = cols + n * g.c * g.kh * g.kw * cells;
    T sum = 0;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t top = h + g.ph - i * g.dh;  // = oh * sh for the output row that reads h via tap i
      if (top < 0 || top % g.sh != 0 || top / g.sh >= g.oh) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t left = w + g.pw - j * g.dw;
        if (left < 0 || left % g.sw != 0 || left / g.sw >= g.ow) continue;
        sum += sample[((c * g.kh + i) * g.kw + j) * cells + top / g.sh * g.ow + left / g.sw];
      }
    }
    grad_x[e] = sum;
  }
};

Tensor device_empty(const Shape& shape, const Tensor& like) {
  return empty(shape, TensorOptions(like.dtype()).with_device(like.device()));
}

Tensor im2col(const Tensor& x, const Window2d& g) {
  Tensor cols = device_empty({g.n, g.c * g.kh * g.kw, g.oh * g.ow}, x);
  dispatch_floating(x.dtype(), "conv2d", [&]<class T>() {
    for_each(x.device(), cols.numel(), Im2colBody<T>{x.data<T>(), g, cols.data<T>()});
  });
  return cols;
}

void conv2d_forward_cuda(const Tensor& x, const Tensor& weight, const Window2d& g, const Tensor& out) {
  if (cudnn::conv2d_forward(x, weight, g, out)) return;  // Note [cuDNN or ember's kernels]
  const int64_t oc = weight.size(0), ck = weight.size(1);
  kernels::matmul[x.device()](weight.unsqueeze(0).expand({g.n, oc, ck}), im2col(x, g), out);
}

void conv2d_backward_input_cuda(const Tensor& grad, const Tensor& weight, const Window2d& g, const Tensor& grad_x) {
  if (cudnn::conv2d_backward_input(grad, weight, g, grad_x)) return;
  const int64_t oc = weight.size(0), ck = weight.size(1);
  Tensor cols = device_empty({g.n, ck, g.oh * g.ow}, grad);
  kernels::matmul[grad.device()](weight.t().unsqueeze(0).expand({g.n, ck, oc}), grad, cols);
  dispatch_floating(grad.dtype(), "conv2d backward", [&]<class T>() {
    for_each(grad.device(), grad_x.numel(), Col2imBody<T>{cols.data<T>(), g, grad_x.data<T>()});
  });
}

void conv2d_backward_weight_cuda(const Tensor& grad, const Tensor& x, const Window2d& g, const Tensor& grad_weight) {
  if (cudnn::conv2d_backward_weight(grad, x, g, grad_weight)) return;
  const int64_t oc = grad_weight.size(0), ck = grad_weight.size(1);
  Tensor per_sample = device_empty({g.n, oc, ck}, grad);
  kernels::matmul[grad.device()](grad, im2col(x, g).transpose(1, 2), per_sample);
  kernels::reduce[grad.device()](kernels::ReduceOp::Sum, per_sample, 1, g.n, oc * ck, grad_weight);
}

const bool registered =
    kernels::add_kernel(kernels::conv2d_forward, DeviceType::CUDA, &conv2d_forward_cuda) &&
    kernels::add_kernel(kernels::conv2d_backward_input, DeviceType::CUDA, &conv2d_backward_input_cuda) &&
    kernels::add_kernel(kernels::conv2d_backward_weight, DeviceType::CUDA, &conv2d_backward_weight_cuda);

}  // namespace
}  // namespace ember::cuda
