// CPU kernels for fill, copy (with dtype conversion), unary, binary, where and masked_scale.
// The op is chosen by a switch outside the loop; the loop body is a functor of the shared math
// table (Note [One math table]) that the compiler inlines, so there is no call per element (see
// Note [CPU elementwise loops]).
//
// Note [Sixteen-bit elementwise loops]
// unary, binary, where and masked_scale compute on bfloat16 and float16 themselves rather than
// being staged through float32 copies (Note [Sixteen-bit floats through float32]): each element
// widens to float32 as it is loaded (math::Compute), the math runs in float32, and the result
// rounds once as it is stored, which is what staging computes, without its two conversion
// passes and float32 temporaries. Widening is a shift (bfloat16) or a few integer operations
// (float16) and the rounding is integer arithmetic with a select for NaN: inline code with no
// calls, which the loops run under simd_dispatch like the float32 ones. Measured (bench_core;
// bench/RESULTS.md, "Mixed precision on the CPU"): a bfloat16 add or relu is faster than
// float32's, being memory-bound passes over half the bytes; gelu, bound by its arithmetic, is
// slower.
#include <cmath>
#include <cstdint>

#include "core/convert.h"
#include "core/cpu/loops.h"
#include "core/cpu/simd_dispatch.h"
#include "core/cpu/vmath.h"
#include "core/kernel_bodies/elementwise_math.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

using math::Compute;

template <class T>
T* at(char* p) { return reinterpret_cast<T*>(p); }

void fill_cpu(const Tensor& out, double value) {
  dispatch_any(out.dtype(), [&]<class T>() {
    const T v = convert<T>(value);
    for_each_row<1>({&out}, [&](auto p, auto s, int64_t n) {
      T* o = at<T>(p[0]);
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = v;
    });
  });
}

// A copy within one dtype moves the elements' bytes as unsigned integers of their size: no
// conversion (a 16-bit float no longer widens and rounds back), so every bit pattern, a NaN's
// payload too, arrives unchanged. A contiguous row is a plain loop, not a memcpy call: the rows
// of a head split are as short as 32 elements.
template <class Bits>
void copy_bits(const Tensor& src, const Tensor& dst) {
  for_each_row<2>({&dst, &src}, [&](auto p, auto s, int64_t n) {
    Bits* o = at<Bits>(p[0]);
    const Bits* x = at<Bits>(p[1]);
    if (s[0] == 1 && s[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = x[i];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = x[i * s[1]];
    }
  });
}

void copy_cpu(const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    switch (element_size(dst.dtype())) {
      case 1: return copy_bits<uint8_t>(src, dst);
      case 2: return copy_bits<uint16_t>(src, dst);
      case 4: return copy_bits<uint32_t>(src, dst);
      case 8: return copy_bits<uint64_t>(src, dst);
      default: break;
    }
  }
  dispatch_any(src.dtype(), [&]<class S>() {
    dispatch_any(dst.dtype(), [&]<class D>() {
      for_each_row<2>({&dst, &src}, [&](auto p, auto s, int64_t n) {
        D* o = at<D>(p[0]);
        const S* x = at<S>(p[1]);
        if (s[0] == 1 && s[1] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = convert<D>(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * s[0]] = convert<D>(x[i * s[1]]);
        }
      });
    });
  });
}

// The math of every op is the shared table (Note [One math table]); here it gets the CPU's
// elementary functions. Those are inline and straight-line for float, so under simd_dispatch
// exp, gelu, tanh, ... on float32 vectorise like an add (Note [Vectorisable float math]).
struct HostFunctions {
  template <class C> static C exp(C v) { return vmath::exp(v); }
  template <class C> static C log(C v) { return vmath::log(v); }
  template <class C> static C tanh(C v) { return vmath::tanh(v); }
  template <class C> static C erf(C v) { return vmath::erf(v); }
  template <class C> static math::ErfAndGaussian<C> erf_and_gaussian(C v) { return vmath::erf_and_gaussian(v); }
  template <class C> static C sqrt(C v) { return std::sqrt(v); }
  template <class C> static C abs(C v) { return std::abs(v); }
  template <class C> static C pow(C v, C e) { return std::pow(v, e); }
};

// The rows of unary and binary ops are functions that take their pointers and strides as values
// (Note [Row loops take values] in core/cpu/softmax.cpp): written inline in the lambdas, a uint8
// store (a comparison's result, a mask) may alias the captured pointers, and the row reloaded them
// at every element and stayed scalar (dropout's mask comparison took several times as long:
// bench/RESULTS.md, "Activation backwards in one pass").
template <class T, class F>
void unary_row(const T* in, T* o, int64_t n, int64_t s_in, int64_t s_out, F f) {
  if (s_out == 1 && s_in == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(f(static_cast<Compute<T>>(in[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) o[i * s_out] = convert<T>(f(static_cast<Compute<T>>(in[i * s_in])));
  }
}

template <class T, class F>
void unary_loop(const Tensor& x, const Tensor& out, F f) {
  for_each_row<2>({&out, &x}, [&](auto p, auto s, int64_t n) {
    simd_dispatch([&] { unary_row<T>(at<T>(p[1]), at<T>(p[0]), n, s[1], s[0], f); });
  });
}

void unary_cpu(kernels::UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  dispatch_any(x.dtype(), [&]<class T>() {
    using C = Compute<T>;
    const bool known = math::visit_unary(op, [&]<kernels::UnaryOp kOp>() {
      unary_loop<T>(x, out, math::UnaryMath<kOp, C, HostFunctions>{convert<C>(a), convert<C>(b)});
    });
    EMBER_CHECK(known, "[unary] unknown op ", static_cast<int>(op));
  });
}

template <class T, class R, class F>
void binary_row(const T* a, const T* b, R* o, int64_t n, int64_t sa, int64_t sb, int64_t so, F f) {
  if (so == 1 && sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = convert<R>(f(static_cast<Compute<T>>(a[i]), static_cast<Compute<T>>(b[i])));
  } else if (so == 1 && sa == 1 && sb == 0) {  // tensor op broadcast scalar row
    const Compute<T> bv = static_cast<Compute<T>>(b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = convert<R>(f(static_cast<Compute<T>>(a[i]), bv));
  } else {
    for (int64_t i = 0; i < n; ++i)
      o[i * so] = convert<R>(f(static_cast<Compute<T>>(a[i * sa]), static_cast<Compute<T>>(b[i * sb])));
  }
}

template <class T, class R, class F>
void binary_loop(const Tensor& x, const Tensor& y, const Tensor& out, F f) {
  for_each_row<3>({&out, &x, &y}, [&](auto p, auto s, int64_t n) {
    // the activation backwards' rows call exp and erf (Note [Vectorisable float math])
    simd_dispatch([&] { binary_row<T, R>(at<T>(p[1]), at<T>(p[2]), at<R>(p[0]), n, s[1], s[2], s[0], f); });
  });
}

void binary_cpu(kernels::BinaryOp op, const Tensor& x, const Tensor& y, const Tensor& out) {
  dispatch_any(x.dtype(), [&]<class T>() {
    const bool known = math::visit_binary(op, [&]<kernels::BinaryOp kOp>() {
      binary_loop<T, math::BinaryResult<kOp, T>>(x, y, out, math::BinaryMath<kOp, Compute<T>, HostFunctions>{});
    });
    EMBER_CHECK(known, "[binary] unknown op ", static_cast<int>(op));
  });
}

void where_cpu(const Tensor& cond, const Tensor& x, const Tensor& y, const Tensor& out) {
  dispatch_any(x.dtype(), [&]<class T>() {
    for_each_row<4>({&out, &cond, &x, &y}, [&](auto p, auto s, int64_t n) {
      T* o = at<T>(p[0]);
      const uint8_t* c = at<uint8_t>(p[1]);
      const T* a = at<T>(p[2]);
      const T* b = at<T>(p[3]);
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = c[i * s[1]] ? a[i * s[2]] : b[i * s[3]];
    });
  });
}

// One contiguous row, its pointers taken as values (Note [Row loops take values] in
// core/cpu/softmax.cpp).
template <class T>
void masked_scale_row(const T* x, const uint8_t* keep, T* out, int64_t n, Compute<T> scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = convert<T>(math::masked_scale(keep[i], static_cast<Compute<T>>(x[i]), scale));
}

void masked_scale_cpu(const Tensor& x, const Tensor& mask, double scale, const Tensor& out) {
  dispatch_floating_or_sixteen_bit(x.dtype(), "masked_scale", [&]<class T>() {
    const Compute<T> s = static_cast<Compute<T>>(scale);
    // contiguous operands of one shape coalesce into one row, which for_each_row cuts into chunks
    for_each_row<3>({&out, &x, &mask}, [s](auto p, auto, int64_t n) {
      simd_dispatch([&] { masked_scale_row(at<T>(p[1]), at<uint8_t>(p[2]), at<T>(p[0]), n, s); });
    });
  });
}

constexpr auto kNative = kernels::SixteenBit::Native;
const bool registered = kernels::add_kernel(kernels::fill, DeviceType::CPU, &fill_cpu, kNative) &&
                        kernels::add_kernel(kernels::masked_scale, DeviceType::CPU, &masked_scale_cpu, kNative) &&
                        kernels::add_kernel(kernels::copy, DeviceType::CPU, &copy_cpu, kNative) &&
                        kernels::add_kernel(kernels::unary, DeviceType::CPU, &unary_cpu, kNative) &&
                        kernels::add_kernel(kernels::binary, DeviceType::CPU, &binary_cpu, kNative) &&
                        kernels::add_kernel(kernels::where, DeviceType::CPU, &where_cpu, kNative);

}  // namespace
}  // namespace ember::cpu
