// CUDA kernels of softmax and log_softmax over the last dim, one block per row (Note [One block
// per output] in cuda/block_reduce.cuh), with the row formulas the CPU's use too
// (core/kernel_bodies/softmax.h, Note [Softmax rows]).
#include "core/kernel_bodies/softmax.h"
#include "core/kernels.h"
#include "cuda/block_reduce.cuh"
#include "cuda/loops.cuh"
#include "cuda/row_stats.cuh"

namespace ember::cuda {
namespace {

namespace body = softmax_bodies;

template <class T>
__global__ void softmax_kernel(const T* x, int64_t rows, int64_t cols, T* out, kernels::SoftmaxSpec spec) {
  const T scale = static_cast<T>(spec.scale);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * cols;
    T* o = out + r * cols;
    int64_t n = spec.visible(r, cols);
    const RowStats<T> s = row_stats(in, n, scale);
    if (spec.empty_rows_masked && body::all_minus_infinity(s.max)) n = 0;
    const auto norm = body::normaliser<T>(s.sum_exp);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const T v = body::shifted(in[j], scale, s.max);
      if (j >= n) o[j] = body::masked_value<T>(spec.log);
      else o[j] = spec.log ? body::log_softmax_value(v, norm) : body::softmax_value(exp(v), norm);
    }
  }
}

void softmax_cuda(const Tensor& x, const Tensor& out, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    launch_per_output(out.device(), rows, softmax_kernel<T>, x.data<T>(), rows, cols, out.data<T>(), spec);
  });
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* g, int64_t rows, int64_t cols, T* gx,
                                        kernels::SoftmaxSpec spec) {
  const T scale = static_cast<T>(spec.scale);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *py = y + r * cols, *pg = g + r * cols;
    T* o = gx + r * cols;
    const int64_t n = spec.visible(r, cols);
    const T total = static_cast<T>(block_reduce<SumOp<T>>(n, [&](int64_t j) {
      return static_cast<double>(body::backward_term(py[j], pg[j], spec.log));
    }));
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      if (j >= n) o[j] = T(0);
      else o[j] = spec.log ? body::log_softmax_grad(exp(py[j]), pg[j], total, scale)
                           : body::softmax_grad(py[j], pg[j], total, scale);
    }
  }
}

void softmax_backward_cuda(const Tensor& y, const Tensor& g, const Tensor& gx, const kernels::SoftmaxSpec& spec) {
  const int64_t cols = y.size(-1), rows = y.numel() / std::max<int64_t>(cols, 1);
  dispatch_floating(y.dtype(), "softmax_backward", [&]<class T>() {
    launch_per_output(gx.device(), rows, softmax_backward_kernel<T>, y.data<T>(), g.data<T>(), rows, cols,
                      gx.data<T>(), spec);
  });
}

const bool registered =
    kernels::add_kernel(kernels::softmax, DeviceType::CUDA, &softmax_cuda) &&
    kernels::add_kernel(kernels::softmax_backward, DeviceType::CUDA, &softmax_backward_cuda);

}  // namespace
}  // namespace ember::cuda
