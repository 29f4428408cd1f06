// CUDA kernel of GradScaler's fused unscale (Note [Unscaling gradients in one pass] in
// core/kernel_bodies/grad_unscale.h): one launch per gradient on the device's stream. A thread
// that meets an inf or a NaN stores 1 into found_inf; the stores race, but they all store the
// same value. Nothing is read back here: GradScaler::step reads found_inf when it decides.
#include "core/grad_unscale.h"
#include "core/kernel_bodies/grad_unscale.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using grad_unscale_bodies::UnscaleMath;

template <class T>
struct UnscaleBody {
  T* grad;
  float* found_inf;
  UnscaleMath<T> inv_scale;
  __device__ void operator()(int64_t i) const {
    if (grad_unscale_bodies::unscale_element(grad[i], inv_scale)) *found_inf = 1.0f;
  }
};

void unscale_grads_cuda(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  for (const Tensor& g : grads)
    dispatch_any(g.dtype(), [&]<class T>() {
      for_each(g.device(), g.numel(),
               UnscaleBody<T>{g.data<T>(), found_inf.data<float>(), static_cast<UnscaleMath<T>>(inv_scale)});
    });
}

const bool registered = kernels::add_kernel(kernels::unscale_grads, DeviceType::CUDA, &unscale_grads_cuda,
                                            kernels::SixteenBit::Native);

}  // namespace
}  // namespace ember::cuda
