#pragma once
// 2-D convolution and pooling over NCHW input: the geometry of their windows, and their signatures
// and slots in the kernel table (Note [The kernel table] in core/kernel_table.h).
#include <cstdint>

#include "core/kernel_table.h"

namespace ember::kernels {

// Geometry of a 2-D convolution or pooling window over NCHW input.
struct Window2d {
  int64_t n, c, h, w;    // input
  int64_t kh, kw;        // window
  int64_t sh, sw;        // stride
  int64_t ph, pw;        // padding
  int64_t dh = 1, dw = 1;  // dilation (convolution only)
  int64_t oh, ow;        // output
};
// Convolution (cross-correlation) of x contiguous [n, c, h, w] with weight contiguous
// [oc, c*kh*kw]: out contiguous [n, oc, oh*ow], bias not included.
using Conv2dFwdFn = void(const Tensor& x, const Tensor& weight, const Window2d& g, const Tensor& out);
// Its adjoints, from grad contiguous [n, oc, oh*ow]: in x, grad_x contiguous [n, c, h, w], and in
// the weight, grad_weight contiguous [oc, c*kh*kw] summed over the batch; either may be undefined
// (not wanted). x is read for grad_weight only (contiguous then). One kernel for both, so that an
// implementation can share work between them (oneDNN reads grad once in its own layout for both:
// Note [Convolution through oneDNN]).
using Conv2dBwdFn = void(const Tensor& grad, const Tensor& x, const Tensor& weight, const Window2d& g,
                         const Tensor& grad_x, const Tensor& grad_weight);
// out [n, c, oh, ow] = window max; indices (int64, same shape) = flat h*w position of the max
using MaxPool2dFwdFn = void(const Tensor& x, const Window2d& g, const Tensor& out, const Tensor& indices);
// grad_x (zero-filled by the caller) [n, c, h, w] += grad_out at the recorded positions
using MaxPool2dBwdFn = void(const Tensor& grad_out, const Tensor& indices, const Window2d& g, const Tensor& grad_x);
using AvgPool2dFwdFn = void(const Tensor& x, const Window2d& g, bool count_include_pad, const Tensor& out);
// grad_x is written (not accumulated): every element is assigned
using AvgPool2dBwdFn = void(const Tensor& grad_out, const Window2d& g, bool count_include_pad, const Tensor& grad_x);
// adaptive average pooling: g.kh/kw/sh/sw/ph/pw are unused; windows come from h/oh and w/ow.
// The backward writes every element of grad_x, as avg_pool2d_backward does.
using AdaptiveAvgPool2dFwdFn = void(const Tensor& x, const Window2d& g, const Tensor& out);
using AdaptiveAvgPool2dBwdFn = void(const Tensor& grad_out, const Window2d& g, const Tensor& grad_x);

inline Kernel<Conv2dFwdFn> conv2d_forward{"conv2d_forward", Writes{3}};
inline Kernel<Conv2dBwdFn> conv2d_backward{"conv2d_backward", Writes{4, 5}};
inline Kernel<MaxPool2dFwdFn> max_pool2d_forward{"max_pool2d_forward", Writes{2, 3}};
inline Kernel<MaxPool2dBwdFn> max_pool2d_backward{"max_pool2d_backward", Writes{3}};
inline Kernel<AvgPool2dFwdFn> avg_pool2d_forward{"avg_pool2d_forward", Writes{3}};
inline Kernel<AvgPool2dBwdFn> avg_pool2d_backward{"avg_pool2d_backward", Writes{3}};
inline Kernel<AdaptiveAvgPool2dFwdFn> adaptive_avg_pool2d_forward{"adaptive_avg_pool2d_forward", Writes{2}};
inline Kernel<AdaptiveAvgPool2dBwdFn> adaptive_avg_pool2d_backward{"adaptive_avg_pool2d_backward", Writes{2}};

}  // namespace ember::kernels
