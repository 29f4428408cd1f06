// CPU kernel of GradScaler's fused unscale (Note [Unscaling gradients in one pass] in
// core/kernel_bodies/grad_unscale.h): per gradient, one loop that multiplies and checks, its
// threads or-ing their findings together.
#include "core/cpu/parallel.h"
#include "core/grad_unscale.h"
#include "core/kernel_bodies/grad_unscale.h"

namespace ember::cpu {
namespace {

using grad_unscale_bodies::UnscaleMath;
using grad_unscale_bodies::unscale_element;

void unscale_grads_cpu(const std::vector<Tensor>& grads, const Tensor& found_inf, double inv_scale) {
  bool found = false;
  for (const Tensor& g : grads) {
    dispatch_any(g.dtype(), [&]<class T>() {
      T* data = g.data<T>();
      const int64_t n = g.numel();
      const auto inv = static_cast<UnscaleMath<T>>(inv_scale);
      bool here = false;
#pragma omp parallel for if (n > kParallelGrain) schedule(static) reduction(|| : here)
      for (int64_t i = 0; i < n; ++i) here = unscale_element(data[i], inv) || here;
      found = found || here;
    });
  }
  if (found) found_inf.data<float>()[0] = 1.0f;
}

const bool registered = kernels::add_kernel(kernels::unscale_grads, DeviceType::CPU, &unscale_grads_cpu,
                                            kernels::SixteenBit::Native);

}  // namespace
}  // namespace ember::cpu
