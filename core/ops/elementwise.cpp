// Elementwise ops: forward (a kernel call) and backward (tensor ops, so any device) side by side.
#include <cmath>
#include <limits>
#include <optional>

#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/convert.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;
using kernels::BinaryOp;
using kernels::UnaryOp;

constexpr double kInf = std::numeric_limits<double>::infinity();

namespace ops {
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_defined(a, name);
  check_defined(b, name);
  check_same_device(a, b, name);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  DType dtype = promote(a.dtype(), b.dtype());
  if (op == BinaryOp::Div && !is_floating(dtype)) dtype = kFloat32;  // true division, as PyTorch
  Tensor x = a.to(dtype).expand(shape), y = b.to(dtype).expand(shape);
  Tensor out = empty_on(shape, kernels::is_comparison(op) ? kUInt8 : dtype, a.device());
  if (out.numel() > 0) kernels::binary[a.device()](op, x, y, out);
  return out;
}
}  // namespace ops

namespace {

// What the backward of a broadcasting op needs to know about one input: the broadcast gradient
// is summed back to its shape and cast back to its dtype (the op computed in the promoted one).
struct Operand {
  Shape shape;
  DType dtype;
};

// The State of every binary broadcasting op: its two operands.
struct Operands {
  Operand a, b;
};

Operands operands_of(const Tensor& a, const Tensor& b) { return {{a.shape(), a.dtype()}, {b.shape(), b.dtype()}}; }

// The State of a binary op whose backward reads the operands' values too.
struct SavedOperands : Operands {
  autograd::SavedRef a_value, b_value;
};

SavedOperands save_operands(Ctx& c, const Tensor& a, const Tensor& b) {
  return {operands_of(a, b), c.save(a), c.save(b)};
}

// The gradient for an input of a broadcasting op: summed back to the input's shape and dtype.
Tensor reduce_grad(const Tensor& g, const Operand& input) { return sum_to(g, input.shape).to(input.dtype); }

struct Add : Function<Add> {
  static constexpr const char* name = "add";
  using State = Operands;
  static Tensor forward(Ctx&, State& s, const Tensor& a, const Tensor& b) {
    s = operands_of(a, b);
    return ops::binary_kernel(BinaryOp::Add, a, b, name);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    return {c.needs_input_grad(0) ? reduce_grad(g, s.a) : Tensor(),
            c.needs_input_grad(1) ? reduce_grad(g, s.b) : Tensor()};
  }
};

struct Sub : Function<Sub> {
  static constexpr const char* name = "sub";
  using State = Operands;
  static Tensor forward(Ctx&, State& s, const Tensor& a, const Tensor& b) {
    s = operands_of(a, b);
    return ops::binary_kernel(BinaryOp::Sub, a, b, name);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    return {c.needs_input_grad(0) ? reduce_grad(g, s.a) : Tensor(),
            c.needs_input_grad(1) ? reduce_grad(-g, s.b) : Tensor()};
  }
};

struct Mul : Function<Mul> {
  static constexpr const char* name = "mul";
  using State = SavedOperands;
  static Tensor forward(Ctx& c, State& s, const Tensor& a, const Tensor& b) {
    s = save_operands(c, a, b);
    return ops::binary_kernel(BinaryOp::Mul, a, b, name);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    return {c.needs_input_grad(0) ? reduce_grad(g * c.get(s.b_value), s.a) : Tensor(),
            c.needs_input_grad(1) ? reduce_grad(g * c.get(s.a_value), s.b) : Tensor()};
  }
};

struct Div : Function<Div> {
  static constexpr const char* name = "div";
  using State = SavedOperands;
  static Tensor forward(Ctx& c, State& s, const Tensor& a, const Tensor& b) {
    s = save_operands(c, a, b);
    return ops::binary_kernel(BinaryOp::Div, a, b, name);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor b = c.get(s.b_value);
    return {c.needs_input_grad(0) ? reduce_grad(g / b, s.a) : Tensor(),
            c.needs_input_grad(1) ? reduce_grad(-g * c.get(s.a_value) / (b * b), s.b) : Tensor()};
  }
};

// Masks (uint8, 1 where true) combined and made, for the backwards that pick a gradient per element.
Tensor is_nan(const Tensor& t) { return ne(t, t); }
Tensor both(const Tensor& mask_a, const Tensor& mask_b) { return mul(mask_a, mask_b); }
Tensor either(const Tensor& mask_a, const Tensor& mask_b) { return maximum(mask_a, mask_b); }

// Note [Pow at zero]
// The textbook slopes of a^b are b a^(b-1) in a and a^b log(a) in b, and at a = 0 they meet 0 * inf:
// 0^0 has slope 0 * 0^-1 in a, and 0^2 has slope 0 * log(0) in b. Both are NaN as written, while
// a^0 is the constant 1 (slope 0 in a for every a) and 0^b is the constant 0 for b > 0 (slope 0 in
// b). PyTorch gives those zeros, and so does ember: the a-slope is 0 where b == 0 (pow(x, 0.0)
// too), the b-slope 0 where a == 0 and b >= 0. Elsewhere at 0 the infinities are real ones
// (0^-1 is a pole) and stay.
struct Pow : Function<Pow> {
  static constexpr const char* name = "pow";
  struct State : SavedOperands {
    autograd::SavedRef y;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& a, const Tensor& b) {
    Tensor y = ops::binary_kernel(BinaryOp::Pow, a, b, name);
    s = {save_operands(c, a, b), c.save(y)};
    return y;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor a = c.get(s.a_value), b = c.get(s.b_value);
    const Tensor zero = ops::wrap_scalar(0.0, g);
    Tensor ga, gb;
    if (c.needs_input_grad(0)) ga = reduce_grad(where(b == 0.0, zero, g * b * pow(a, b - 1.0)), s.a);
    if (c.needs_input_grad(1)) gb = reduce_grad(where(both(a == 0.0, b >= 0.0), zero, g * c.get(s.y) * log(a)), s.b);
    return {ga, gb};
  }
};

// maximum/minimum: the gradient goes to the winner; ties split it evenly (as PyTorch). Where
// either operand is NaN neither side lost, so both receive the whole gradient, as in PyTorch.
template <BinaryOp Op>
struct Extremum : Function<Extremum<Op>> {
  static constexpr const char* name = Op == BinaryOp::Maximum ? "maximum" : "minimum";
  using State = SavedOperands;
  static Tensor forward(Ctx& c, State& s, const Tensor& a, const Tensor& b) {
    s = save_operands(c, a, b);
    return ops::binary_kernel(Op, a, b, name);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor a = c.get(s.a_value), b = c.get(s.b_value);
    const Tensor half_tie = eq(a, b).to(g.dtype()) * 0.5;
    auto share = [&](const Tensor& lost) { return g * (1.0 - lost.to(g.dtype()) - half_tie); };
    const bool max = Op == BinaryOp::Maximum;
    return {c.needs_input_grad(0) ? reduce_grad(share(max ? lt(a, b) : gt(a, b)), s.a) : Tensor(),
            c.needs_input_grad(1) ? reduce_grad(share(max ? gt(a, b) : lt(a, b)), s.b) : Tensor()};
  }
};

// y = a * x + b for scalars a, b: scalar add/sub/mul/div without a broadcast 0-d tensor.
struct Affine : Function<Affine> {
  static constexpr const char* name = "affine";
  struct State {
    double scale;  // a: the gradient is g * a
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, double a, double b) {
    s.scale = a;
    return ops::unary_kernel(UnaryOp::AffineScalar, x, a, b);
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) {
    return {s.scale == 1.0 ? g : ops::unary_kernel(UnaryOp::AffineScalar, g, s.scale, 0.0)};
  }
};

// What a unary op's f' is computed from, and so what it saves.
enum class Saves { Input, Output };

struct SavedOperand {
  autograd::SavedRef value;  // x or y, as the op's Saves says
};

// The forward of a unary op whose gradient is g * f'(saved): runs the kernel (a and b are its
// scalar parameters, see kernels::UnaryOp) and saves what f' is computed from, the input
// or the output, as `What` says, into `saved`.
template <UnaryOp Op, Saves What>
Tensor unary_forward(Ctx& c, SavedOperand& saved, const Tensor& x, const char* name, double a = 0, double b = 0) {
  ops::check_floating(x, name);
  Tensor y = ops::unary_kernel(Op, x, a, b);
  saved.value = c.save(What == Saves::Output ? y : x);
  return y;
}

// The unary ops without parameters: each gives only f' as `derivative`.
template <class Derived, UnaryOp Op, Saves What>
struct UnaryFunction : Function<Derived> {
  using State = SavedOperand;
  static Tensor forward(Ctx& c, State& s, const Tensor& x) {
    return unary_forward<Op, What>(c, s, x, Derived::name);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) { return {g * Derived::derivative(c.get(s.value))}; }
};

struct Exp : UnaryFunction<Exp, UnaryOp::Exp, Saves::Output> {
  static constexpr const char* name = "exp";
  static Tensor derivative(const Tensor& y) { return y; }
};
struct Log : UnaryFunction<Log, UnaryOp::Log, Saves::Input> {
  static constexpr const char* name = "log";
  static Tensor derivative(const Tensor& x) { return 1.0 / x; }
};
struct Sqrt : UnaryFunction<Sqrt, UnaryOp::Sqrt, Saves::Output> {
  static constexpr const char* name = "sqrt";
  static Tensor derivative(const Tensor& y) { return 0.5 / y; }
};
struct Rsqrt : UnaryFunction<Rsqrt, UnaryOp::Rsqrt, Saves::Output> {
  static constexpr const char* name = "rsqrt";
  static Tensor derivative(const Tensor& y) { return -0.5 * y * y * y; }
};
struct Abs : UnaryFunction<Abs, UnaryOp::Abs, Saves::Input> {
  static constexpr const char* name = "abs";
  static Tensor derivative(const Tensor& x) { return sign(x); }
};
// Note [Activation backwards in one pass]
// The backward of an activation is g * f'(saved). Written as tensor ops it costs memory and
// passes: g * (y > 0) makes a uint8 mask, converts it to g's dtype and multiplies; sigmoid's
// g * (y * (1 - y)) makes two activation-sized temporaries in three passes. Those temporaries are
// alive with the result at the peak of backward (1.25 activations more for relu). So each
// activation has a BinaryOp row in the math table that takes (g, saved) and computes the whole
// g * f'(saved) per element: the backward is one pass, and the gradient is the only new tensor.
// Sigmoid's, tanh's and silu's rows do the arithmetic of the composed ops they replace, in the
// same order; gelu's takes erf and the normal density from one exp (vmath::erf_and_gaussian),
// which agrees with the two-exp formula to rounding; gelu's tanh form evaluates its tanh once
// for the derivative (1 + t) / 2 + y (1 - t^2) u'(y) / 2. Relu's row passes the gradient of a NaN
// output, as PyTorch does.
template <class Derived, UnaryOp Op, Saves What, BinaryOp Grad>
struct Activation : Function<Derived> {
  using State = SavedOperand;
  static Tensor forward(Ctx& c, State& s, const Tensor& x) { return unary_forward<Op, What>(c, s, x, Derived::name); }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    return {ops::binary_kernel(Grad, g, c.get(s.value), Derived::name)};
  }
};

struct Relu : Activation<Relu, UnaryOp::Relu, Saves::Output, BinaryOp::ReluGrad> {
  static constexpr const char* name = "relu";
};
struct Sigmoid : Activation<Sigmoid, UnaryOp::Sigmoid, Saves::Output, BinaryOp::SigmoidGrad> {
  static constexpr const char* name = "sigmoid";
};
struct Tanh : Activation<Tanh, UnaryOp::Tanh, Saves::Output, BinaryOp::TanhGrad> {
  static constexpr const char* name = "tanh";
};
struct Gelu : Activation<Gelu, UnaryOp::Gelu, Saves::Input, BinaryOp::GeluGrad> {
  static constexpr const char* name = "gelu";
};
struct Silu : Activation<Silu, UnaryOp::Silu, Saves::Input, BinaryOp::SiluGrad> {
  static constexpr const char* name = "silu";
};
struct GeluTanh : Activation<GeluTanh, UnaryOp::GeluTanh, Saves::Input, BinaryOp::GeluTanhGrad> {
  static constexpr const char* name = "gelu";
};

// The unary ops with scalar parameters (leaky_relu's slope, pow's exponent, clamp's bounds):
// each declares them by name as its State, after the saved input (a SavedOperand base) and in
// the order of the kernel's (a, b), and gives f' as `derivative`, which reads them from the
// State. All three compute f' from the input.
template <class Derived, UnaryOp Op>
struct UnaryFunctionWithParams : Function<Derived> {
  template <class State, class... Params>
  static Tensor forward(Ctx& c, State& s, const Tensor& x, Params... params) {
    s = State{{}, params...};
    return unary_forward<Op, Saves::Input>(c, s, x, Derived::name, params...);
  }
  template <class State>
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    return {g * Derived::derivative(c.get(s.value), s)};
  }
};

struct LeakyRelu : UnaryFunctionWithParams<LeakyRelu, UnaryOp::LeakyRelu> {
  static constexpr const char* name = "leaky_relu";
  struct State : SavedOperand {
    double negative_slope;
  };
  static Tensor derivative(const Tensor& x, const State& s) {
    return where(x > 0.0, ones_like(x),
                 full(x.shape(), s.negative_slope, TensorOptions(x.dtype()).with_device(x.device())));
  }
};
struct PowScalar : UnaryFunctionWithParams<PowScalar, UnaryOp::PowScalar> {
  static constexpr const char* name = "pow";
  struct State : SavedOperand {
    double exponent;
  };
  // x^0 is 1 everywhere, 0^-1 included: its slope is 0, not 0 * inf (Note [Pow at zero]).
  static Tensor derivative(const Tensor& x, const State& s) {
    return s.exponent == 0.0 ? zeros_like(x) : s.exponent * pow(x, s.exponent - 1.0);
  }
};
struct Clamp : UnaryFunctionWithParams<Clamp, UnaryOp::Clamp> {
  static constexpr const char* name = "clamp";
  struct State : SavedOperand {
    double min, max;
  };
  // 1 strictly between the bounds as x's dtype holds them: a bfloat16 x equal to bfloat16(0.7)
  // is on the bound max = 0.7 (Note [Clamp's gradient on a bound]).
  static Tensor derivative(const Tensor& x, const State& s) {
    return ops::unary_kernel(UnaryOp::InRange, x, ops::stored_value(x.dtype(), s.min),
                             ops::stored_value(x.dtype(), s.max));
  }
};

// Note [Clamp's gradient on a bound]
// clamp is flat outside its bounds and the identity between them, so on a bound it has no
// derivative and the framework picks a subgradient. PyTorch 2.15 picks the one of least norm,
// where 1.13 let the gradient through to x on a bound; ember follows 2.15:
// - scalar bounds (clamp, clamp_min, clamp_max): x gets the gradient only strictly between them,
//   0 on a bound as relu gives 0 at 0. The bounds are compared as x's dtype holds them: bfloat16
//   rounds 0.7 to 0.69921875, so a bfloat16 x of 0.69921875 is on the bound max = 0.7. A NaN x
//   gets 0.
// - one tensor bound: clamp(x, lo) is maximum(x, lo) and clamp(x, max = hi) minimum(x, hi), and
//   they are computed as such: the winner gets the gradient, a tie splits it in halves, and where
//   either is NaN both get all of it.
// - both tensor bounds (ClampTensors): y = min(max(x, lo), hi), so hi wins where lo > hi and a NaN
//   in x, lo or hi gives NaN. Where lo < hi: x gets the gradient strictly between, lo below, hi
//   above, and an x on a bound splits it in halves with that bound. Where lo == hi: below and
//   above as before, and an x equal to both keeps it all (halving it three ways would not be a
//   subgradient of least norm). Where lo > hi: all to hi. A comparison with a NaN is false, which
//   decides the rest: a NaN x gets it all, a NaN bound gets nothing.
// tests/fixtures/make_everyday_fixtures.py's case_clamp_ties checks every tie against PyTorch 2.15.

struct ClampTensors : Function<ClampTensors> {
  static constexpr const char* name = "clamp";
  struct State {
    Operand x, min, max;
    autograd::SavedRef x_value, min_value, max_value;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Tensor& min, const Tensor& max) {
    s = {{x.shape(), x.dtype()}, {min.shape(), min.dtype()}, {max.shape(), max.dtype()},
         c.save(x), c.save(min), c.save(max)};
    const Tensor raised = where(either(lt(x, min), is_nan(min)), min, x);
    return where(either(gt(raised, max), is_nan(max)), max, raised);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const Tensor x = c.get(s.x_value), lo = c.get(s.min_value), hi = c.get(s.max_value);
    const Tensor one = ops::wrap_scalar(1.0, g), half = ops::wrap_scalar(0.5, g), zero = ops::wrap_scalar(0.0, g);
    const Tensor below = lt(x, lo), above = gt(x, hi), ordered = lt(lo, hi), not_crossed = le(lo, hi);
    // The share of the gradient each operand gets: g where `whole`, g / 2 where `halved`.
    auto share = [&](const Tensor& whole, const Tensor& halved, const Operand& to) {
      return reduce_grad(g * where(whole, one, where(halved, half, zero)), to);
    };
    Tensor gx, glo, ghi;
    if (c.needs_input_grad(0)) {
      const Tensor on_bound = both(either(eq(x, lo), eq(x, hi)), ordered);
      gx = reduce_grad(g * where(either(below, above), zero, where(on_bound, half, one)), s.x);
    }
    if (c.needs_input_grad(1)) glo = share(both(below, not_crossed), both(eq(x, lo), ordered), s.min);
    if (c.needs_input_grad(2))
      ghi = share(either(lt(hi, lo), both(above, not_crossed)), both(eq(x, hi), ordered), s.max);
    return {gx, glo, ghi};
  }
};

struct Where : Function<Where> {
  static constexpr const char* name = "where";
  struct State : Operands {
    autograd::SavedRef cond;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& cond, const Tensor& a, const Tensor& b) {
    EMBER_CHECK(cond.dtype() == kUInt8, "[where] condition must be a uint8 mask, got ", cond.dtype());
    ops::check_same_device(cond, a, name);
    ops::check_same_device(a, b, name);
    Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), name), b.shape(), name);
    DType dtype = promote(a.dtype(), b.dtype());
    s = {operands_of(a, b), c.save(cond)};
    Tensor out = ops::empty_on(shape, dtype, a.device());
    if (out.numel() > 0)
      kernels::where[a.device()](cond.expand(shape), a.to(dtype).expand(shape), b.to(dtype).expand(shape), out);
    return out;
  }
  // Routed by where itself rather than multiplied by the mask: any nonzero condition selects a,
  // so a mask holding 2 must not double a's gradient (nor give b a negative one).
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor cond = c.get(s.cond), zero = ops::wrap_scalar(0.0, g);
    return {Tensor(), c.needs_input_grad(1) ? reduce_grad(where(cond, g, zero), s.a) : Tensor(),
            c.needs_input_grad(2) ? reduce_grad(where(cond, zero, g), s.b) : Tensor()};
  }
};

// sign is flat wherever it has a slope, so its gradient is 0 (PyTorch's too): the output stays in
// the graph, and a loss that reaches x only through sign gets a zero gradient, not an error.
struct Sign : Function<Sign> {
  static constexpr const char* name = "sign";
  static Tensor forward(Ctx&, const Tensor& x) { return ops::unary_kernel(UnaryOp::Sign, x); }
  static Grads backward(Ctx&, const Tensor& g) { return {zeros_like(g)}; }
};

struct Neg : Function<Neg> {
  static constexpr const char* name = "neg";
  static Tensor forward(Ctx&, const Tensor& x) { return ops::unary_kernel(UnaryOp::Neg, x); }
  static Grads backward(Ctx&, const Tensor& g) { return {-g}; }
};

// Python-number semantics for `tensor op scalar`: the scalar is a double, i.e. a Python float,
// so an integral tensor computes in float32 (int_tensor * 2.0 is float32), as PyTorch.
Tensor as_floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(kFloat32); }

// Whether an integer dtype holds the number s exactly: not a fraction, NaN or past its range.
bool integer_dtype_holds(DType dtype, double s) { return s == std::floor(s) && holds_value(dtype, s); }

// Comparison with a Python number: in x's dtype unless the number is one x cannot hold (a
// fraction, NaN, or past x's range: an int64 tensor < 1e30 is true everywhere, and a uint8 one
// > -1 too, as with a Python float in PyTorch; a wrapped -1 would be 255).
Tensor compare_scalar(BinaryOp op, const Tensor& x, double s, const char* name) {
  Tensor xs = !is_floating(x.dtype()) && !integer_dtype_holds(x.dtype(), s) ? x.to(kFloat64) : x;
  return ops::binary_kernel(op, xs, ops::wrap_scalar(s, xs), name);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return Add::apply(a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return Sub::apply(a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return Mul::apply(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return Div::apply(a, b); }
// exp, log, rsqrt and pow compute in float32 under CUDA autocast (Note [Autocast's table]).
Tensor pow(const Tensor& a, const Tensor& b) {
  if (autocast::OpCast cast{"pow", a}) return pow(cast(a), cast(b));
  return Pow::apply(a, b);
}
Tensor pow(const Tensor& x, double exponent) {
  if (autocast::OpCast cast{"pow", x}) return pow(cast(x), exponent);
  return PowScalar::apply(x, exponent);
}
Tensor maximum(const Tensor& a, const Tensor& b) { return Extremum<BinaryOp::Maximum>::apply(a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return Extremum<BinaryOp::Minimum>::apply(a, b); }
Tensor add_scalar(const Tensor& x, double value) { return Affine::apply(as_floating(x), 1.0, value); }
Tensor mul_scalar(const Tensor& x, double value) { return Affine::apply(as_floating(x), value, 0.0); }
Tensor neg(const Tensor& x) { return Neg::apply(x); }
Tensor exp(const Tensor& x) {
  if (autocast::OpCast cast{"exp", x}) return exp(cast(x));
  return Exp::apply(x);
}
Tensor log(const Tensor& x) {
  if (autocast::OpCast cast{"log", x}) return log(cast(x));
  return Log::apply(x);
}
Tensor sqrt(const Tensor& x) { return Sqrt::apply(x); }
Tensor rsqrt(const Tensor& x) {
  if (autocast::OpCast cast{"rsqrt", x}) return rsqrt(cast(x));
  return Rsqrt::apply(x);
}
Tensor abs(const Tensor& x) { return Abs::apply(x); }
Tensor sign(const Tensor& x) { return Sign::apply(x); }
// A missing bound is an infinite one: the kernel's comparisons and InRange's gradient mask treat
// -inf and inf as no bound at all, so the one-sided forms need no kernels of their own. An
// integer x keeps its dtype when the bounds are integers it holds (clamping ids to a table's
// rows), and computes in float32 otherwise, as `int_tensor * 2.5` does.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  ops::check_defined(x, "clamp");
  EMBER_CHECK(min || max, "[clamp] needs a min or a max, both are missing (input shape ", shape_str(x.shape()), ")");
  if (!is_floating(x.dtype())) {
    auto held = [&](std::optional<double> bound) { return !bound || integer_dtype_holds(x.dtype(), *bound); };
    if (!held(min) || !held(max)) return clamp(x.to(kFloat32), min, max);
    auto as_tensor = [&](std::optional<double> bound) { return bound ? ops::wrap_scalar(*bound, x) : Tensor(); };
    return clamp(x, as_tensor(min), as_tensor(max));
  }
  return Clamp::apply(x, min.value_or(-kInf), max.value_or(kInf));
}
Tensor clamp_min(const Tensor& x, double min) {
  ops::check_defined(x, "clamp_min");
  return clamp(x, min, std::nullopt);
}
Tensor clamp_max(const Tensor& x, double max) {
  ops::check_defined(x, "clamp_max");
  return clamp(x, std::nullopt, max);
}
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  ops::check_defined(x, "clamp");
  EMBER_CHECK(min.defined() || max.defined(), "[clamp] needs a min or a max tensor, both are undefined (input shape ",
              shape_str(x.shape()), ")");
  Shape shape = x.shape();
  for (const Tensor* bound : {&min, &max}) {
    if (!bound->defined()) continue;
    ops::check_same_device(x, *bound, "clamp");
    shape = broadcast_shapes(shape, bound->shape(), "clamp");
  }
  if (!max.defined()) return maximum(x, min);  // Note [Clamp's gradient on a bound]
  if (!min.defined()) return minimum(x, max);
  return ClampTensors::apply(x, min, max);
}
Tensor relu(const Tensor& x) { return Relu::apply(x); }
Tensor leaky_relu(const Tensor& x, double negative_slope) { return LeakyRelu::apply(x, negative_slope); }
Tensor sigmoid(const Tensor& x) { return Sigmoid::apply(x); }
Tensor tanh(const Tensor& x) { return Tanh::apply(x); }
Tensor gelu(const Tensor& x) { return Gelu::apply(x); }
Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  check_enum(approximate, GeluApproximate::Tanh, "gelu", "approximation");
  return approximate == GeluApproximate::None ? Gelu::apply(x) : GeluTanh::apply(x);
}
Tensor silu(const Tensor& x) { return Silu::apply(x); }
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) { return Where::apply(condition, a, b); }
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  ops::check_defined(x, "masked_fill");
  ops::check_defined(mask, "masked_fill", "mask");
  EMBER_CHECK(mask.dtype() == kUInt8, "[masked_fill] mask must be a uint8 mask, got ", mask.dtype(), " of shape ",
              shape_str(mask.shape()));
  ops::check_same_device(x, mask, "masked_fill");
  EMBER_CHECK(ops::broadcasts_to(mask.shape(), x.shape()), "[masked_fill] mask of shape ",
              shape_str(mask.shape()), " does not broadcast to the input shape ", shape_str(x.shape()));
  ops::check_fill_value(value, x.dtype(), x.shape(), "masked_fill");
  return where(mask, ops::wrap_scalar(value, x), x);
}

Tensor eq(const Tensor& a, const Tensor& b) { return ops::binary_kernel(BinaryOp::Eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return ops::binary_kernel(BinaryOp::Ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return ops::binary_kernel(BinaryOp::Lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return ops::binary_kernel(BinaryOp::Le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return ops::binary_kernel(BinaryOp::Gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return ops::binary_kernel(BinaryOp::Ge, a, b, "ge"); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& x, double s) { return add_scalar(x, s); }
Tensor operator+(double s, const Tensor& x) { return add_scalar(x, s); }
Tensor operator-(const Tensor& x, double s) { return add_scalar(x, -s); }
Tensor operator-(double s, const Tensor& x) { return Affine::apply(as_floating(x), -1.0, s); }
Tensor operator*(const Tensor& x, double s) { return mul_scalar(x, s); }
Tensor operator*(double s, const Tensor& x) { return mul_scalar(x, s); }
// Division is true division: an integral tensor is divided in float32.
Tensor operator/(const Tensor& x, double s) { return mul_scalar(as_floating(x), 1.0 / s); }
Tensor operator/(double s, const Tensor& x) { return mul_scalar(pow(as_floating(x), -1.0), s); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, double s) { return compare_scalar(BinaryOp::Eq, a, s, "eq"); }
Tensor operator!=(const Tensor& a, double s) { return compare_scalar(BinaryOp::Ne, a, s, "ne"); }
Tensor operator<(const Tensor& a, double s) { return compare_scalar(BinaryOp::Lt, a, s, "lt"); }
Tensor operator<=(const Tensor& a, double s) { return compare_scalar(BinaryOp::Le, a, s, "le"); }
Tensor operator>(const Tensor& a, double s) { return compare_scalar(BinaryOp::Gt, a, s, "gt"); }
Tensor operator>=(const Tensor& a, double s) { return compare_scalar(BinaryOp::Ge, a, s, "ge"); }

}  // namespace ember
