// CPU kernels for fill, copy (with dtype conversion), unary, binary and where.
// The op is chosen by a switch outside the loop; the loop body is a lambda the compiler inlines,
// so there is no call per element (see Note [CPU elementwise loops]).
#include <cmath>

#include "core/convert.h"
#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

template <class T>
T* at(char* p) { return reinterpret_cast<T*>(p); }

void fill_cpu(const Tensor& out, double value) {
  dispatch(out.dtype(), [&]<class T>() {
    const T v = convert<T>(value);
    for_each_row<1>({&out}, [&](auto p, auto s, int64_t n) {
      T* o = at<T>(p[0]);
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = v;
    });
  });
}

void copy_cpu(const Tensor& src, const Tensor& dst) {
  dispatch(src.dtype(), [&]<class S>() {
    dispatch(dst.dtype(), [&]<class D>() {
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

// Unary ops run through simd_dispatch: with the vmath functions inlined, exp, gelu, tanh, ... on
// float32 vectorise like an add (Note [Vectorisable float math]).
template <class T, class F>
void unary_loop(const Tensor& x, const Tensor& out, F f) {
  for_each_row<2>({&out, &x}, [&](auto p, auto s, int64_t n) {
    T* o = at<T>(p[0]);
    const T* in = at<T>(p[1]);
    simd_dispatch([&] {
      if (s[0] == 1 && s[1] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(f(static_cast<Compute<T>>(in[i])));
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * s[0]] = convert<T>(f(static_cast<Compute<T>>(in[i * s[1]])));
      }
    });
  });
}

void unary_cpu(kernels::UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  using kernels::UnaryOp;
  dispatch(x.dtype(), [&]<class T>() {
    using C = Compute<T>;
    const C ca = static_cast<C>(a), cb = static_cast<C>(b);
    constexpr C kSqrt1_2 = static_cast<C>(0.70710678118654752440);
    constexpr C kInvSqrt2Pi = static_cast<C>(0.39894228040143267794);
    switch (op) {
      case UnaryOp::Neg: return unary_loop<T>(x, out, [](C v) { return -v; });
      case UnaryOp::Exp: return unary_loop<T>(x, out, [](C v) { return vmath::exp(v); });
      case UnaryOp::Log: return unary_loop<T>(x, out, [](C v) { return vmath::log(v); });
      case UnaryOp::Sqrt: return unary_loop<T>(x, out, [](C v) { return std::sqrt(v); });
      case UnaryOp::Rsqrt: return unary_loop<T>(x, out, [](C v) { return C(1) / std::sqrt(v); });
      case UnaryOp::Abs: return unary_loop<T>(x, out, [](C v) { return std::abs(v); });
      case UnaryOp::Sign: return unary_loop<T>(x, out, [](C v) { return C((v > 0) - (v < 0)); });
      case UnaryOp::Relu: return unary_loop<T>(x, out, [](C v) { return v > 0 ? v : C(0); });
      case UnaryOp::Sigmoid: return unary_loop<T>(x, out, [](C v) { return C(1) / (C(1) + vmath::exp(-v)); });
      case UnaryOp::Tanh: return unary_loop<T>(x, out, [](C v) { return vmath::tanh(v); });
      case UnaryOp::Gelu:
        return unary_loop<T>(x, out, [=](C v) { return C(0.5) * v * (C(1) + vmath::erf(v * kSqrt1_2)); });
      case UnaryOp::GeluDerivative:
        return unary_loop<T>(x, out, [=](C v) {
          return C(0.5) * (C(1) + vmath::erf(v * kSqrt1_2)) + v * kInvSqrt2Pi * vmath::exp(C(-0.5) * v * v);
        });
      case UnaryOp::Silu: return unary_loop<T>(x, out, [](C v) { return v / (C(1) + vmath::exp(-v)); });
      case UnaryOp::SiluDerivative:
        return unary_loop<T>(x, out, [](C v) {
          const C s = C(1) / (C(1) + vmath::exp(-v));
          return s * (C(1) + v * (C(1) - s));
        });
      case UnaryOp::PowScalar: return unary_loop<T>(x, out, [=](C v) { return std::pow(v, ca); });
      case UnaryOp::Clamp: return unary_loop<T>(x, out, [=](C v) { return v < ca ? ca : (v > cb ? cb : v); });
      case UnaryOp::InRange: return unary_loop<T>(x, out, [=](C v) { return C(v >= ca && v <= cb); });
      case UnaryOp::LeakyRelu: return unary_loop<T>(x, out, [=](C v) { return v > 0 ? v : ca * v; });
      case UnaryOp::AffineScalar: return unary_loop<T>(x, out, [=](C v) { return ca * v + cb; });
    }
  });
}

template <class T, class R, class F>
void binary_loop(const Tensor& x, const Tensor& y, const Tensor& out, F f) {
  for_each_row<3>({&out, &x, &y}, [&](auto p, auto s, int64_t n) {
    R* o = at<R>(p[0]);
    const T* a = at<T>(p[1]);
    const T* b = at<T>(p[2]);
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = convert<R>(f(static_cast<Compute<T>>(a[i]), static_cast<Compute<T>>(b[i])));
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {  // tensor op broadcast scalar row
      const Compute<T> bv = static_cast<Compute<T>>(b[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = convert<R>(f(static_cast<Compute<T>>(a[i]), bv));
    } else {
      for (int64_t i = 0; i < n; ++i)
        o[i * s[0]] = convert<R>(f(static_cast<Compute<T>>(a[i * s[1]]), static_cast<Compute<T>>(b[i * s[2]])));
    }
  });
}

void binary_cpu(kernels::BinaryOp op, const Tensor& x, const Tensor& y, const Tensor& out) {
  using kernels::BinaryOp;
  dispatch(x.dtype(), [&]<class T>() {
    using C = Compute<T>;
    switch (op) {
      case BinaryOp::Add: return binary_loop<T, T>(x, y, out, [](C a, C b) { return a + b; });
      case BinaryOp::Sub: return binary_loop<T, T>(x, y, out, [](C a, C b) { return a - b; });
      case BinaryOp::Mul: return binary_loop<T, T>(x, y, out, [](C a, C b) { return a * b; });
      case BinaryOp::Div: return binary_loop<T, T>(x, y, out, [](C a, C b) { return a / b; });
      case BinaryOp::Pow: return binary_loop<T, T>(x, y, out, [](C a, C b) { return std::pow(a, b); });
      case BinaryOp::Maximum: return binary_loop<T, T>(x, y, out, [](C a, C b) { return a > b ? a : b; });
      case BinaryOp::Minimum: return binary_loop<T, T>(x, y, out, [](C a, C b) { return a < b ? a : b; });
      case BinaryOp::Eq: return binary_loop<T, uint8_t>(x, y, out, [](C a, C b) { return a == b; });
      case BinaryOp::Ne: return binary_loop<T, uint8_t>(x, y, out, [](C a, C b) { return a != b; });
      case BinaryOp::Lt: return binary_loop<T, uint8_t>(x, y, out, [](C a, C b) { return a < b; });
      case BinaryOp::Le: return binary_loop<T, uint8_t>(x, y, out, [](C a, C b) { return a <= b; });
      case BinaryOp::Gt: return binary_loop<T, uint8_t>(x, y, out, [](C a, C b) { return a > b; });
      case BinaryOp::Ge: return binary_loop<T, uint8_t>(x, y, out, [](C a, C b) { return a >= b; });
    }
  });
}

void where_cpu(const Tensor& cond, const Tensor& x, const Tensor& y, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    for_each_row<4>({&out, &cond, &x, &y}, [&](auto p, auto s, int64_t n) {
      T* o = at<T>(p[0]);
      const uint8_t* c = at<uint8_t>(p[1]);
      const T* a = at<T>(p[2]);
      const T* b = at<T>(p[3]);
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = c[i * s[1]] ? a[i * s[2]] : b[i * s[3]];
    });
  });
}

const bool registered = kernels::add_kernel(kernels::fill, DeviceType::CPU, &fill_cpu) &&
                        kernels::add_kernel(kernels::copy, DeviceType::CPU, &copy_cpu) &&
                        kernels::add_kernel(kernels::unary, DeviceType::CPU, &unary_cpu) &&
                        kernels::add_kernel(kernels::binary, DeviceType::CPU, &binary_cpu) &&
                        kernels::add_kernel(kernels::where, DeviceType::CPU, &where_cpu);

}  // namespace
}  // namespace ember::cpu
