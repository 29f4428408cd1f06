// CUDA kernels for the unary and binary elementwise ops, where and masked_scale: the math table
// the CPU uses too (Note [One math table] in core/kernel_bodies/elementwise_math.h), over any
// strides (Note [CUDA elementwise loops]). bfloat16 and float16 tensors are computed on directly,
// each element widened to float32 and the result rounded once, as on the CPU (Note [Sixteen-bit
// elementwise loops] in core/cpu/elementwise.cpp).
//
// Note [One kernel per op and dtype]
// The op is a template parameter of the functor the kernel calls, picked by one switch on the
// host (math::visit_unary), so each (op, dtype) pair compiles to its own straight-line kernel
// instead of every thread switching on the op for every element.
#include <cmath>
#include <type_traits>

#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernels.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

using math::Compute;

template <class C>
constexpr bool kFloat = std::is_same_v<C, float>;

// The GPU's elementary functions for the shared math table (Note [One math table]): CUDA's
// single-precision functions for float, its double ones otherwise.
struct DeviceFunctions {
  template <class C> __device__ static C exp(C v) { if constexpr (kFloat<C>) return ::expf(v); else return ::exp(v); }
  template <class C> __device__ static C log(C v) { if constexpr (kFloat<C>) return ::logf(v); else return ::log(v); }
  template <class C> __device__ static C tanh(C v) { if constexpr (kFloat<C>) return ::tanhf(v); else return ::tanh(v); }
  template <class C> __device__ static C erf(C v) { if constexpr (kFloat<C>) return ::erff(v); else return ::erf(v); }
  template <class C> __device__ static math::ErfAndGaussian<C> erf_and_gaussian(C v) { return {erf(v), exp(-v * v)}; }
  template <class C> __device__ static C sqrt(C v) { if constexpr (kFloat<C>) return ::sqrtf(v); else return ::sqrt(v); }
  template <class C> __device__ static C abs(C v) { if constexpr (kFloat<C>) return ::fabsf(v); else return ::fabs(v); }
  template <class C> __device__ static C pow(C v, C e) {
    const C r = kFloat<C> ? ::powf(v, e) : ::pow(v, e);
    return exact_integer_power(v, e) ? ::rint(r) : r;
  }

  // Note [Integer powers on the GPU]
  // CUDA's pow is accurate to 2 ulp, not correctly rounded as the CPU's: 3^1 may come out as
  // 2.9999999999999996, which an int64 result (integers compute in double) then truncates to 2.
  // When base and exponent are integers, the exponent is not negative and the power is smaller
  // than 2^mantissa bits, the true power is an integer the format holds, so the integer nearest to
  // pow's result is it: rounding gives the CPU's exact answer, for int64 and floating tensors alike.
  template <class C> __device__ static bool exact_integer_power(C v, C e) {
    constexpr C kExactBelow = kFloat<C> ? C(16777216) : C(9007199254740992);  // 2^24, 2^53
    return v == ::trunc(v) && e == ::trunc(e) && e >= C(0) && ::fabs(v) < kExactBelow &&
           e * ::log2(::fabs(v) + C(1)) < (kFloat<C> ? C(24) : C(53));
  }
};

template <class T, class Math>
struct UnaryBody {
  Indexer<2> index;  // operands: out, x
  const T* x;
  T* out;
  Math math;
  __device__ void operator()(int64_t i) const {
    const Offsets<2> o = index(i);
    out[o.at[0]] = convert<T>(math(static_cast<Compute<T>>(x[o.at[1]])));
  }
};

void unary_cuda(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  dispatch_any(x.dtype(), [&]<class T>() {
    using C = Compute<T>;
    const bool known = math::visit_unary(op, [&]<UnaryOp kOp>() {
      using Math = math::UnaryMath<kOp, C, DeviceFunctions>;
      for_each(out.device(), out.numel(),
               UnaryBody<T, Math>{make_indexer<2>({&out, &x}, "unary"), x.data<T>(), out.data<T>(),
                                  Math{convert<C>(a), convert<C>(b)}});
    });
    EMBER_CHECK(known, "[unary] unknown op ", static_cast<int>(op));
  });
}

template <class T, class R, class Math>
struct BinaryBody {
  Indexer<3> index;  // operands: out, x, y
  const T* x;
  const T* y;
  R* out;
  Math math;
  __device__ void operator()(int64_t i) const {
    const Offsets<3> o = index(i);
    out[o.at[0]] = convert<R>(math(static_cast<Compute<T>>(x[o.at[1]]), static_cast<Compute<T>>(y[o.at[2]])));
  }
};

void binary_cuda(BinaryOp op, const Tensor& x, const Tensor& y, const Tensor& out) {
  dispatch_any(x.dtype(), [&]<class T>() {
    const bool known = math::visit_binary(op, [&]<BinaryOp kOp>() {
      using R = math::BinaryResult<kOp, T>;
      using Math = math::BinaryMath<kOp, Compute<T>, DeviceFunctions>;
      for_each(out.device(), out.numel(),
               BinaryBody<T, R, Math>{make_indexer<3>({&out, &x, &y}, "binary"), x.data<T>(), y.data<T>(),
                                      out.data<R>(), Math{}});
    });
    EMBER_CHECK(known, "[binary] unknown op ", static_cast<int>(op));
  });
}

template <class T>
struct WhereBody {
  Indexer<4> index;  // operands: out, cond, x, y
  const uint8_t* cond;
  const T* x;
  const T* y;
  T* out;
  __device__ void operator()(int64_t i) const {
    const Offsets<4> o = index(i);
    out[o.at[0]] = cond[o.at[1]] ? x[o.at[2]] : y[o.at[3]];
  }
};

void where_cuda(const Tensor& cond, const Tensor& x, const Tensor& y, const Tensor& out) {
  dispatch_any(x.dtype(), [&]<class T>() {
    for_each(out.device(), out.numel(),
             WhereBody<T>{make_indexer<4>({&out, &cond, &x, &y}, "where"), cond.data<uint8_t>(), x.data<T>(),
                          y.data<T>(), out.data<T>()});
  });
}

// out = mask ? x * scale : 0 over contiguous tensors (dropout), one thread per element.
template <class T>
struct MaskedScaleBody {
  const T* x;
  const uint8_t* keep;
  Compute<T> scale;
  T* out;
  __device__ void operator()(int64_t i) const {
    out[i] = convert<T>(math::masked_scale(keep[i], static_cast<Compute<T>>(x[i]), scale));
  }
};

void masked_scale_cuda(const Tensor& x, const Tensor& mask, double scale, const Tensor& out) {
  dispatch_floating_or_sixteen_bit(x.dtype(), "masked_scale", [&]<class T>() {
    for_each(out.device(), out.numel(),
             MaskedScaleBody<T>{x.data<T>(), mask.data<uint8_t>(), static_cast<Compute<T>>(scale), out.data<T>()});
  });
}

constexpr auto kNative = kernels::SixteenBit::Native;
const bool registered = kernels::add_kernel(kernels::masked_scale, DeviceType::CUDA, &masked_scale_cuda, kNative) &&
                        kernels::add_kernel(kernels::unary, DeviceType::CUDA, &unary_cuda, kNative) &&
                        kernels::add_kernel(kernels::binary, DeviceType::CUDA, &binary_cuda, kNative) &&
                        kernels::add_kernel(kernels::where, DeviceType::CUDA, &where_cuda, kNative);

}  // namespace
}  // namespace ember::cuda
