// CUDA kernels for the unary and binary elementwise ops and where: the same math as
// core/cpu/elementwise.cpp, over any strides (Note [CUDA elementwise loops]).
//
// Note [One kernel per op and dtype]
// The op is a template parameter of the functor the kernel calls, picked by one switch on the
// host, so each (op, dtype) pair compiles to its own straight-line kernel instead of every
// thread switching on the op for every element. `if constexpr` keeps the math of all ops in one
// readable table per family.
#include <cmath>
#include <type_traits>

#include "core/kernels.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

// The compute type of T, as on the CPU: floats compute in themselves, integers in double.
template <class T>
using Compute = std::conditional_t<std::is_floating_point_v<T>, T, double>;

// The math functions below are unqualified on purpose: CUDA overloads exp, log, erf, ... for
// float as well as double, so float tensors use the single-precision versions.
template <UnaryOp kOp, class C>
struct UnaryMath {
  C a, b;  // the op's scalar arguments
  __device__ C operator()(C v) const {
    constexpr C kSqrt1_2 = static_cast<C>(0.70710678118654752440);
    constexpr C kInvSqrt2Pi = static_cast<C>(0.39894228040143267794);
    if constexpr (kOp == UnaryOp::Neg) return -v;
    else if constexpr (kOp == UnaryOp::Exp) return exp(v);
    else if constexpr (kOp == UnaryOp::Log) return log(v);
    else if constexpr (kOp == UnaryOp::Sqrt) return sqrt(v);
    else if constexpr (kOp == UnaryOp::Rsqrt) return C(1) / sqrt(v);
    else if constexpr (kOp == UnaryOp::Abs) return fabs(v);
    else if constexpr (kOp == UnaryOp::Sign) return C((v > 0) - (v < 0));
    else if constexpr (kOp == UnaryOp::Relu) return v > 0 ? v : C(0);
    else if constexpr (kOp == UnaryOp::Sigmoid) return C(1) / (C(1) + exp(-v));
    else if constexpr (kOp == UnaryOp::Tanh) return tanh(v);
    else if constexpr (kOp == UnaryOp::Gelu) return C(0.5) * v * (C(1) + erf(v * kSqrt1_2));
    else if constexpr (kOp == UnaryOp::GeluDerivative)
      return C(0.5) * (C(1) + erf(v * kSqrt1_2)) + v * kInvSqrt2Pi * exp(C(-0.5) * v * v);
    else if constexpr (kOp == UnaryOp::Silu) return v / (C(1) + exp(-v));
    else if constexpr (kOp == UnaryOp::SiluDerivative) {
      const C s = C(1) / (C(1) + exp(-v));
      return s * (C(1) + v * (C(1) - s));
    }
    else if constexpr (kOp == UnaryOp::PowScalar) return pow(v, a);
    else if constexpr (kOp == UnaryOp::Clamp) return v < a ? a : (v > b ? b : v);
    else if constexpr (kOp == UnaryOp::InRange) return C(v >= a && v <= b);
    else if constexpr (kOp == UnaryOp::LeakyRelu) return v > 0 ? v : a * v;
    else if constexpr (kOp == UnaryOp::AffineScalar) return a * v + b;
    else static_assert(kOp != kOp, "UnaryOp without CUDA math");
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

template <class T, UnaryOp kOp>
void launch_unary(const Tensor& x, const Tensor& out, double a, double b) {
  using Math = UnaryMath<kOp, Compute<T>>;
  const Math math{static_cast<Compute<T>>(a), static_cast<Compute<T>>(b)};
  for_each(out.device(), out.numel(),
           UnaryBody<T, Math>{make_indexer<2>({&out, &x}, "unary"), x.data<T>(), out.data<T>(), math});
}

void unary_cuda(UnaryOp op, const Tensor& x, const Tensor& out, double a, double b) {
  dispatch(x.dtype(), [&]<class T>() {
    switch (op) {
      case UnaryOp::Neg: return launch_unary<T, UnaryOp::Neg>(x, out, a, b);
      case UnaryOp::Exp: return launch_unary<T, UnaryOp::Exp>(x, out, a, b);
      case UnaryOp::Log: return launch_unary<T, UnaryOp::Log>(x, out, a, b);
      case UnaryOp::Sqrt: return launch_unary<T, UnaryOp::Sqrt>(x, out, a, b);
      case UnaryOp::Rsqrt: return launch_unary<T, UnaryOp::Rsqrt>(x, out, a, b);
      case UnaryOp::Abs: return launch_unary<T, UnaryOp::Abs>(x, out, a, b);
      case UnaryOp::Sign: return launch_unary<T, UnaryOp::Sign>(x, out, a, b);
      case UnaryOp::Relu: return launch_unary<T, UnaryOp::Relu>(x, out, a, b);
      case UnaryOp::Sigmoid: return launch_unary<T, UnaryOp::Sigmoid>(x, out, a, b);
      case UnaryOp::Tanh: return launch_unary<T, UnaryOp::Tanh>(x, out, a, b);
      case UnaryOp::Gelu: return launch_unary<T, UnaryOp::Gelu>(x, out, a, b);
      case UnaryOp::GeluDerivative: return launch_unary<T, UnaryOp::GeluDerivative>(x, out, a, b);
      case UnaryOp::Silu: return launch_unary<T, UnaryOp::Silu>(x, out, a, b);
      case UnaryOp::SiluDerivative: return launch_unary<T, UnaryOp::SiluDerivative>(x, out, a, b);
      case UnaryOp::PowScalar: return launch_unary<T, UnaryOp::PowScalar>(x, out, a, b);
      case UnaryOp::Clamp: return launch_unary<T, UnaryOp::Clamp>(x, out, a, b);
      case UnaryOp::InRange: return launch_unary<T, UnaryOp::InRange>(x, out, a, b);
      case UnaryOp::LeakyRelu: return launch_unary<T, UnaryOp::LeakyRelu>(x, out, a, b);
      case UnaryOp::AffineScalar: return launch_unary<T, UnaryOp::AffineScalar>(x, out, a, b);
    }
    EMBER_FAIL("[unary] unknown op ", static_cast<int>(op));
  });
}

// Comparisons (the ops from Eq on, see kernels::is_comparison) write a uint8 mask.
template <BinaryOp kOp, class T>
using BinaryResult = std::conditional_t<(kOp >= BinaryOp::Eq), uint8_t, T>;

template <BinaryOp kOp, class C>
struct BinaryMath {
  __device__ auto operator()(C x, C y) const {
    if constexpr (kOp == BinaryOp::Add) return x + y;
    else if constexpr (kOp == BinaryOp::Sub) return x - y;
    else if constexpr (kOp == BinaryOp::Mul) return x * y;
    else if constexpr (kOp == BinaryOp::Div) return x / y;
    else if constexpr (kOp == BinaryOp::Pow) return pow(x, y);
    else if constexpr (kOp == BinaryOp::Maximum) return x > y ? x : y;
    else if constexpr (kOp == BinaryOp::Minimum) return x < y ? x : y;
    else if constexpr (kOp == BinaryOp::Eq) return x == y;
    else if constexpr (kOp == BinaryOp::Ne) return x != y;
    else if constexpr (kOp == BinaryOp::Lt) return x < y;
    else if constexpr (kOp == BinaryOp::Le) return x <= y;
    else if constexpr (kOp == BinaryOp::Gt) return x > y;
    else if constexpr (kOp == BinaryOp::Ge) return x >= y;
    else static_assert(kOp != kOp, "BinaryOp without CUDA math");
  }
};

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

template <class T, BinaryOp kOp>
void launch_binary(const Tensor& x, const Tensor& y, const Tensor& out) {
  using R = BinaryResult<kOp, T>;
  using Math = BinaryMath<kOp, Compute<T>>;
  for_each(out.device(), out.numel(),
           BinaryBody<T, R, Math>{make_indexer<3>({&out, &x, &y}, "binary"), x.data<T>(), y.data<T>(),
                                  out.data<R>(), Math{}});
}

void binary_cuda(BinaryOp op, const Tensor& x, const Tensor& y, const Tensor& out) {
  dispatch(x.dtype(), [&]<class T>() {
    switch (op) {
      case BinaryOp::Add: return launch_binary<T, BinaryOp::Add>(x, y, out);
      case BinaryOp::Sub: return launch_binary<T, BinaryOp::Sub>(x, y, out);
      case BinaryOp::Mul: return launch_binary<T, BinaryOp::Mul>(x, y, out);
      case BinaryOp::Div: return launch_binary<T, BinaryOp::Div>(x, y, out);
      case BinaryOp::Pow: return launch_binary<T, BinaryOp::Pow>(x, y, out);
      case BinaryOp::Maximum: return launch_binary<T, BinaryOp::Maximum>(x, y, out);
      case BinaryOp::Minimum: return launch_binary<T, BinaryOp::Minimum>(x, y, out);
      case BinaryOp::Eq: return launch_binary<T, BinaryOp::Eq>(x, y, out);
      case BinaryOp::Ne: return launch_binary<T, BinaryOp::Ne>(x, y, out);
      case BinaryOp::Lt: return launch_binary<T, BinaryOp::Lt>(x, y, out);
      case BinaryOp::Le: return launch_binary<T, BinaryOp::Le>(x, y, out);
      case BinaryOp::Gt: return launch_binary<T, BinaryOp::Gt>(x, y, out);
      case BinaryOp::Ge: return launch_binary<T, BinaryOp::Ge>(x, y, out);
    }
    EMBER_FAIL("[binary] unknown op ", static_cast<int>(op));
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
  dispatch(x.dtype(), [&]<class T>() {
    for_each(out.device(), out.numel(),
             WhereBody<T>{make_indexer<4>({&out, &cond, &x, &y}, "where"), cond.data<uint8_t>(), x.data<T>(),
                          y.data<T>(), out.data<T>()});
  });
}

const bool registered = kernels::add_kernel(kernels::unary, DeviceType::CUDA, &unary_cuda) &&
                        kernels::add_kernel(kernels::binary, DeviceType::CUDA, &binary_cuda) &&
                        kernels::add_kernel(kernels::where, DeviceType::CUDA, &where_cuda);

}  // namespace
}  // namespace ember::cuda
