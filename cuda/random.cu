// Random numbers on CUDA: element i of a draw is philox::uniform/normal(seed, offset, i), the
// very function the CPU kernel calls (Note [Philox4x32-10]), so a CUDA tensor drawn from a
// generator state holds the numbers a CPU tensor drawn from the same state holds.
#include "core/kernels.h"
#include "core/philox.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::RandomKind;

// Note [Bit-identical random numbers]
// The CPU computes a + scale * x with a separate multiply and add. nvcc would fuse the two into
// one fma (rounded once instead of twice), which can change the last bit of a double and, now
// and then, of the float it is rounded to; __dmul_rn/__dadd_rn keep the two roundings. (For the
// normal draws the GPU's log/sin/cos may still differ from the CPU's libm by an ulp of a double.)
template <class T, RandomKind kKind>
struct RandomBody {
  T* out;  // contiguous
  uint64_t seed, offset;
  double a, scale;
  __device__ void operator()(int64_t i) const {
    const auto n = static_cast<uint64_t>(i);
    const double x = kKind == RandomKind::Uniform ? philox::uniform(seed, offset, n) : philox::normal(seed, offset, n);
    out[i] = static_cast<T>(__dadd_rn(a, __dmul_rn(scale, x)));
  }
};

// Uniform in [a, b): a + (b - a) * u. Normal with mean a and std b: a + b * z.
void random_cuda(RandomKind kind, const Tensor& out, uint64_t seed, uint64_t offset, double a, double b) {
  dispatch_floating(out.dtype(), "random", [&]<class T>() {
    if (kind == RandomKind::Uniform) {
      for_each(out.device(), out.numel(), RandomBody<T, RandomKind::Uniform>{out.data<T>(), seed, offset, a, b - a});
    } else {
      for_each(out.device(), out.numel(), RandomBody<T, RandomKind::Normal>{out.data<T>(), seed, offset, a, b});
    }
  });
}

const bool registered = kernels::add_kernel(kernels::random, DeviceType::CUDA, &random_cuda);

}  // namespace
}  // namespace ember::cuda
