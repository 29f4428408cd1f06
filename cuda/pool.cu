// CUDA pooling kernels, with the semantics of core/cpu/pool.cpp: max (recording the argmax of
// each window), average and adaptive average, forward and backward.
//
// Note [Pooling backward by gathering]
// The CPU backward scatters: each window adds its gradient into the input cells it covers. On
// the GPU that would need atomics, whose order, and so whose rounding, changes from run to run.
// Here each thread owns one input cell and gathers instead: it visits the windows that can
// cover its cell in increasing output order and adds what each one sends to it. That is the
// order the CPU adds in, so the results are bitwise the CPU's. The candidate windows come from
// inverting the window rule (Candidates in core/kernel_bodies/pool_windows.h); each candidate is then checked
// with the forward's own rule, so the inversion only has to include every covering window. The
// per-thread bodies are core/kernel_bodies/pool.h, which tests/test_kernel_bodies.cpp runs on
// the CPU against naive loops.
#include "core/kernel_bodies/pool.h"
#include "core/kernels.h"
#include "core/kernel_bodies/pool_windows.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::Window2d;
using pooling::AdaptiveWindows;
using pooling::AverageForwardBody;
using pooling::AverageShare;
using pooling::GatherBody;
using pooling::MaxPoolForwardBody;
using pooling::MaxShare;
using pooling::PoolWindows;

void max_pool2d_forward_cuda(const Tensor& x, const Window2d& g, const Tensor& out, const Tensor& indices) {
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    for_each(x.device(), out.numel(),
             MaxPoolForwardBody<T>{x.data<T>(), PoolWindows{g, false}, out.data<T>(), indices.data<int64_t>()});
  });
}

void max_pool2d_backward_cuda(const Tensor& grad_out, const Tensor& indices, const Window2d& g,
                              const Tensor& grad_x) {
  dispatch_floating(grad_out.dtype(), "max_pool2d", [&]<class T>() {
    using Body = GatherBody<T, PoolWindows, MaxShare<T>>;
    for_each(grad_x.device(), grad_x.numel(),
             Body{PoolWindows{g, false}, MaxShare<T>{grad_out.data<T>(), indices.data<int64_t>()}, grad_x.data<T>(),
                  true});
  });
}

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
