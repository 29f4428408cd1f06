// CUDA kernels that set and move memory: fill, copy (any strides, any dtype pair) and transfer
// (host <-> device, device <-> device).
#include <type_traits>

#include "core/kernels.h"
#include "cuda/host_staging.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

template <class T>
struct FillBody {
  Indexer<1> index;
  T* out;
  T value;
  __device__ void operator()(int64_t i) const { out[index(i).at[0]] = value; }
};

void fill_cuda(const Tensor& out, double value) {
  dispatch_any(out.dtype(), [&]<class T>() {
    for_each(out.device(), out.numel(),
             FillBody<T>{make_indexer<1>({&out}, "fill"), out.data<T>(), convert<T>(value)});
  });
}

template <class S, class D>
struct CopyBody {
  Indexer<2> index;  // operands: dst, src
  const S* src;
  D* dst;
  __device__ void operator()(int64_t i) const {
    const Offsets<2> o = index(i);
    // Within one dtype the bits move as they are, as the CPU's copy_bits: a 16-bit NaN widened to
    // float32 and narrowed back would come out with another payload (Note [Sixteen-bit floats]).
    if constexpr (std::is_same_v<S, D>)
      dst[o.at[0]] = src[o.at[1]];
    else
      dst[o.at[0]] = convert<D>(src[o.at[1]]);
  }
};

void copy_cuda(const Tensor& src, const Tensor& dst) {
  dispatch_any(src.dtype(), [&]<class S>() {
    dispatch_any(dst.dtype(), [&]<class D>() {
      for_each(dst.device(), dst.numel(),
               CopyBody<S, D>{make_indexer<2>({&dst, &src}, "copy"), src.data<S>(), dst.data<D>()});
    });
  });
}

// Note [Synchronous transfers]
// A copy to host memory returns only when it is done, as PyTorch's .to() without non_blocking
// does: the caller reads the result next. A copy from host memory is staged through pinned memory
// and does not wait (Note [Staged host-to-device copies] in cuda/host_staging.cpp); only when it
// cannot be staged (too large, or no pinned buffer to be had) does it wait, because its source is
// ordinary pageable memory, which CUDA may read after cudaMemcpyAsync has returned while the
// caller is free to overwrite or free (and so hand to another tensor through the CPU cache) that
// buffer right away. Between two devices the source is ready once its own stream is done, and
// the copy runs on the destination's stream; waiting for that too keeps the source block from
// being reused under the copy.
void transfer_cuda(const Tensor& src, const Tensor& dst) {
  const Device from = src.device(), to = dst.device();
  const size_t nbytes = dst.nbytes();
  if (from.is_cpu() && copy_to_device_staged(to.index, dst.raw_data(), src.raw_data(), nbytes)) return;
  if (from.is_cpu() || to.is_cpu()) {
    const int index = from.is_cpu() ? to.index : from.index;
    DeviceGuard guard(index);
    cudaStream_t s = stream(index);
    CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes,
                               from.is_cpu() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s));
    synchronize(index);  // and raises a bad index found meanwhile (Note [Index errors found on the device])
  } else if (from == to) {  // same stream: ordered like any kernel
    DeviceGuard guard(to.index);
    CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes, cudaMemcpyDeviceToDevice, stream(to.index)));
  } else {
    synchronize(from.index);
    DeviceGuard guard(to.index);
    CUDA_CHECK(cudaMemcpyPeerAsync(dst.raw_data(), to.index, src.raw_data(), from.index, nbytes, stream(to.index)));
    synchronize(to.index);
  }
}

const bool registered = kernels::add_kernel(kernels::fill, DeviceType::CUDA, &fill_cuda, kernels::SixteenBit::Native) &&
                        kernels::add_kernel(kernels::copy, DeviceType::CUDA, &copy_cuda, kernels::SixteenBit::Native) &&
                        kernels::add_kernel(kernels::transfer, DeviceType::CUDA, &transfer_cuda, kernels::SixteenBit::Native);

}  // namespace
}  // namespace ember::cuda
