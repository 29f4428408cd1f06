// matmul: PyTorch's rules (1-D operands are promoted to a row/column and squeezed back, batch
// dims broadcast), one kernel call on [B1, B2, M, K] x [B1, B2, K, N]; linear: x @ w.t() + bias
// with the bias in the product (Note [A bias in the product]).
#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// Note [Two batch levels]
// matmul folds its operands' batch dims ([batch..., r, c], broadcast to one batch shape) into
// what the kernel takes. One level, [B, r, c] with a single batch stride, is a view when the
// batch dims are laid out one after another, or broadcast. Attention's heads are not: q is
// qkv(x).chunk(3, -1)[0].view(b, t, h, e).transpose(1, 2), strides [t * 3he, e, 3he, 1], and
// b and h do not fold into one stride. Copying q, k and v into [b * h, t, e] would cost a pass
// over each at every product that reads them, forward and backward (and over the gradient that
// comes back through the heads' transpose). So the kernel also takes two levels, [B1, B2, r, c]
// with a stride each: the leading batch dims folded into B1, the last one as B2. Only an operand
// whose leading dims do not fold either, or whose last two dims are no BLAS layout (row- or
// column-major with a leading dimension), is copied.

// The last two dims are row- or column-major (see cpu/matmul.cpp).
bool gemm_compatible(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1), rs = t.stride(-2), cs = t.stride(-1);
  bool row_major = (cs == 1 || cols == 1) && (rs >= cols || rows == 1);
  bool col_major = (rs == 1 || rows == 1) && (cs >= rows || cols == 1);
  return row_major || col_major;
}

// [batch..., r, c] -> [B1, B2, r, c], B2 the last batch dim (1 without batch dims), B1 the others
// folded (see the Note); a 2-D operand becomes a stride-0 batch (no copy).
Tensor as_batched(const Tensor& t, const Shape& batch) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const int64_t inner = batch.empty() ? 1 : batch.back(), outer = numel_of(batch) / inner;
  const Tensor ready = gemm_compatible(t) ? t : t.contiguous();
  Shape full = batch;
  full.push_back(r);
  full.push_back(c);
  const Tensor e = ready.expand(full);
  const Shape levels{outer, inner, r, c};
  return ops::view_strides(e.shape(), e.strides(), levels) ? e.view(levels) : e.contiguous().view(levels);
}

// Note [A bias in the product]
// x @ w.t() + bias as a product and an add is three passes over the output: BLAS writes zeros
// into it (its beta = 0 case), the product, and the add reads it and writes a new tensor. With
// the bias copied into the output first and the product accumulated onto it (beta = 1), it is
// two, and one tensor. So Matmul takes an optional bias, broadcast to the product's shape, and
// linear() passes its bias there. The sums round in another order than (x @ w.t()) + bias, by an
// ulp or so; the gradients are the same formulas, the bias's the output's gradient summed to its
// shape.
struct Matmul : Function<Matmul> {
  static constexpr const char* name = "matmul";
  struct State {
    Shape bias_shape;
    autograd::SavedRef a, b;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& a, const Tensor& b, const Tensor& bias) {
    const Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
    Shape batch = broadcast_shapes(batch_a, batch_b, name);
    const int64_t nb = numel_of(batch), m = a.size(-2), n = b.size(-1);
    Shape out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    s.a = c.save(a);
    s.b = c.save(b);
    Tensor out = ops::empty_on({nb, m, n}, a.dtype(), a.device());
    if (bias.defined()) {
      s.bias_shape = bias.shape();
      out.view(out_shape).copy_(bias.expand(out_shape));
    }
    if (out.numel() > 0) {
      const Tensor ba = as_batched(a, batch), bb = as_batched(b, batch);
      kernels::matmul[a.device()](ba, bb, out.view({ba.size(0), ba.size(1), m, n}), bias.defined());
    }
    return out.view(out_shape);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor a = c.get(s.a), b = c.get(s.b);
    Tensor ga, gb;
    if (c.needs_input_grad(0)) ga = sum_to(matmul(g, b.transpose(-1, -2)), a.shape());
    if (c.needs_input_grad(1)) {
      if (b.dim() == 2) {  // a shared weight: one gemm over the flattened batch
        const Tensor rows = a.reshape({-1, a.size(-1)}), grads = g.reshape({-1, g.size(-1)});
        gb = is_transposed(b) ? matmul(grads.t(), rows).t() : matmul(rows.t(), grads);
      } else {
        gb = sum_to(matmul(a.transpose(-1, -2), g), b.shape());
      }
    }
    return {ga, gb, c.needs_input_grad(2) ? sum_to(g, s.bias_shape) : Tensor()};
  }

  // Note [A weight's gradient in its layout]
  // A Linear multiplies by weight.t(), a transposed view. Computed as rows^T @ grads, its
  // gradient would be row-major [in, out], and the transpose's backward would hand the weight a
  // column-major [out, in] gradient, which the weight's .grad cannot take over as it is (Note
  // [Taking over the incoming gradient]): a copy per weight and step. Computed as
  // (grads^T @ rows)^T — the same sums, in the layout of the operand — it reaches the weight
  // contiguous.
  static bool is_transposed(const Tensor& m) { return m.stride(0) == 1 && m.stride(1) != 1; }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast::OpCast cast{"matmul", a}) return matmul(cast(a), cast(b));  // Note [Autocast]
  ops::check_defined(a, "matmul");
  ops::check_defined(b, "matmul");
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both arguments need at least 1 dim, got shapes ",
              shape_str(a.shape()), " and ", shape_str(b.shape()));
  ops::check_same_device(a, b, "matmul");
  EMBER_CHECK(a.dtype() == b.dtype(), "[matmul] expected one dtype, got ", a.dtype(), " and ", b.dtype());
  ops::check_floating(a, "matmul");
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(-1) : b;
  EMBER_CHECK(a2.size(-1) == b2.size(-2), "[matmul] shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
              " cannot be multiplied (", a2.size(-1), " != ", b2.size(-2), ")");
  Tensor out = Matmul::apply(a2, b2, Tensor());
  if (b.dim() == 1) out = out.squeeze(-1);
  if (a.dim() == 1) out = out.squeeze(a.dim() == 1 && b.dim() == 1 ? 0 : -2);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autocast::OpCast cast{"linear", x}) return linear(cast(x), cast(weight), cast(bias));
  ops::check_defined(x, "linear");
  ops::check_defined(weight, "linear", "weight");
  EMBER_CHECK(weight.dim() == 2, "[linear] expects a 2-D weight [out_features, in_features], got shape ",
              shape_str(weight.shape()));
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "[linear] input of shape ", shape_str(x.shape()),
              " does not match the weight's in_features ", weight.size(1), " (weight ", shape_str(weight.shape()), ")");
  ops::check_same_device(x, weight, "linear");
  EMBER_CHECK(x.dtype() == weight.dtype(), "[linear] expected one dtype, got input ", x.dtype(), " and weight ",
              weight.dtype());
  ops::check_floating(x, "linear");
  if (!bias.defined()) return matmul(x, weight.t());
  ops::check_same_device(x, bias, "linear");
  EMBER_CHECK(bias.dtype() == weight.dtype(), "[linear] expected one dtype, got input ", x.dtype(), ", weight ",
              weight.dtype(), " and bias ", bias.dtype());
  EMBER_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "[linear] bias of shape ", shape_str(bias.shape()),
              " does not match the weight's out_features ", weight.size(0), " (weight ", shape_str(weight.shape()),
              ")");
  if (x.dim() == 1) return Matmul::apply(x.unsqueeze(0), weight.t(), bias).squeeze(0);
  return Matmul::apply(x, weight.t(), bias);  // the transposed view reaches the gemm as a flag
}

Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }

}  // namespace ember
