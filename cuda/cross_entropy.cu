// CUDA kernels of the fused softmax cross-entropy over [n, c] logits, with the formulas the CPU's
// use too (core/kernel_bodies/cross_entropy.h, Note [Cross-entropy with label smoothing]): the
// forward gives each row one block, the backward each element one thread.
#include "core/kernel_bodies/cross_entropy.h"
#include "core/kernels.h"
#include "cuda/bad_index.cuh"
#include "cuda/block_reduce.cuh"
#include "cuda/loops.cuh"
#include "cuda/row_stats.cuh"

namespace ember::cuda {
namespace {

namespace body = cross_entropy_bodies;

// A target outside [0, C) is recorded in `bad` (Note [Index errors found on the device]); its
// loss is 0, and the backward, which only compares columns with it, reads nothing out of range.
template <class T>
__global__ void cross_entropy_forward_kernel(const T* x, const int64_t* target, int64_t n, int64_t c,
                                             int64_t ignore_index, double smoothing, T* loss, T* lse,
                                             BadIndex* bad) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* row = x + r * c;
    const RowStats<T> s = row_stats(row, c);
    const double total =
        smoothing == 0 ? 0.0 : block_reduce<SumOp<T>>(c, [&](int64_t j) { return static_cast<double>(row[j]); });
    if (threadIdx.x != 0) continue;
    const double l = body::log_sum_exp(static_cast<double>(s.max), s.sum_exp);
    lse[r] = static_cast<T>(l);
    const int64_t t = target[r];
    loss[r] = t == ignore_index || !index_in_range(bad, IndexCheck::CrossEntropyTarget, t, c)
                  ? T(0)
                  : static_cast<T>(body::loss(l, static_cast<double>(row[t]), total, smoothing, c));
  }
}

void cross_entropy_forward_cuda(const Tensor& logits, const Tensor& target, int64_t ignore_index, double smoothing,
                                const Tensor& loss, const Tensor& lse) {
  const int64_t n = logits.size(0), c = logits.size(1);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    launch_per_output(logits.device(), n, cross_entropy_forward_kernel<T>, logits.data<T>(), target.data<int64_t>(),
                      n, c, ignore_index, smoothing, loss.data<T>(), lse.data<T>(),
                      bad_index_record(logits.device().index));
  });
}

// Element i = (r, j) of grad_x; 0 for ignored rows.
template <class T>
struct CrossEntropyBackwardBody {
  const T *x, *lse, *grad_loss;
  const int64_t* target;
  int64_t c, ignore_index;
  body::GradWeights<T> weights;
  T* grad_x;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / c, j = i % c, t = target[r];
    if (t == ignore_index) {
      grad_x[i] = T(0);
      return;
    }
    const T g = grad_loss[r];
    const T v = body::grad(g, exp(x[i] - lse[r]), weights);
    grad_x[i] = j == t ? v - body::target_term(g, weights) : v;
  }
};

void cross_entropy_backward_cuda(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                 const Tensor& grad_loss, int64_t ignore_index, double smoothing,
                                 const Tensor& grad_logits) {
  const int64_t c = logits.size(1);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    const CrossEntropyBackwardBody<T> per_element{logits.data<T>(),       lse.data<T>(), grad_loss.data<T>(),
                                           target.data<int64_t>(), c,             ignore_index,
                                           body::grad_weights<T>(smoothing, c), grad_logits.data<T>()};
    for_each(logits.device(), logits.numel(), per_element);
  });
}

const bool registered =
    kernels::add_kernel(kernels::cross_entropy_forward, DeviceType::CUDA, &cross_entropy_forward_cuda) &&
    kernels::add_kernel(kernels::cross_entropy_backward, DeviceType::CUDA, &cross_entropy_backward_cuda);

}  // namespace
}  // namespace ember::cuda
