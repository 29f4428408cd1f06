// Layer normalisation: one fused kernel computes the per-row statistics and the output, another
// the three gradients (Note [Layer-norm statistics], Note [Layer-norm backward] in
// core/kernel_bodies/layer_norm.h).
#include <cmath>

#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// x is contiguous and seen as [rows, cols], cols the product of normalized_shape. Saves x, the
// weight and the [rows] statistics mean and rstd: the backward recomputes xhat from them instead
// of keeping a normalised copy of x.
struct LayerNorm : Function<LayerNorm> {
  static constexpr const char* name = "layer_norm";
  struct State {
    int64_t cols;  // the normalised size
    autograd::SavedRef input, weight, mean, rstd;  // mean and rstd: one per row
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t cols,
                        double eps) {
    s.cols = cols;
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    Tensor out = ops::empty_on(x.shape(), x.dtype(), x.device());
    // A 16-bit input keeps its statistics in float32, as PyTorch's does: a row of small spread has a
    // large rstd, and a mean rounded to 16 bits would then shift every recomputed xhat by as much as
    // its spread (the op-table fuzzer found float16 gradients 11% off).
    const DType stats = is_sixteen_bit(x.dtype()) ? kFloat32 : x.dtype();
    Tensor mean = ops::empty_on({rows}, stats, x.device()), rstd = ops::empty_on({rows}, stats, x.device());
    if (out.numel() > 0)
      kernels::layer_norm_forward[x.device()](x.view({rows, cols}), weight, bias, eps, out.view({rows, cols}), mean,
                                              rstd);
    s.input = c.save(x);
    s.weight = c.save(weight);
    s.mean = c.save(mean);
    s.rstd = c.save(rstd);
    return out;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor x = c.get(s.input), weight = c.get(s.weight);
    const int64_t rows = s.cols == 0 ? 0 : x.numel() / s.cols;
    Tensor gx = ops::empty_on(x.shape(), x.dtype(), x.device());
    Tensor gw = c.needs_input_grad(1) ? ops::empty_on(weight.shape(), x.dtype(), x.device()) : Tensor();
    Tensor gb = c.needs_input_grad(2) ? ops::empty_on(weight.shape(), x.dtype(), x.device()) : Tensor();
    if (x.numel() > 0) {
      kernels::layer_norm_backward[x.device()](g.contiguous().view({rows, s.cols}), x.view({rows, s.cols}),
                                               c.get(s.mean), c.get(s.rstd), weight, gx.view({rows, s.cols}),
                                               gw.defined() ? gw.view({s.cols}) : gw,
                                               gb.defined() ? gb.view({s.cols}) : gb);
    } else {  // no rows: the sums over rows are empty
      if (gw.defined()) gw.zero_();
      if (gb.defined()) gb.zero_();
    }
    return {c.needs_input_grad(0) ? gx : Tensor(), gw, gb};
  }
};

void check_affine(const Tensor& t, const Tensor& x, const Shape& normalized_shape, const char* what) {
  if (!t.defined()) return;
  EMBER_CHECK(t.shape() == normalized_shape, "[layer_norm] ", what, " of shape ", shape_str(t.shape()),
              " must have the normalized shape ", shape_str(normalized_shape));
  ops::check_same_device(t, x, "layer_norm");
  EMBER_CHECK(t.dtype() == x.dtype(), "[layer_norm] ", what, " is ", t.dtype(), " but the input is ", x.dtype(),
              " (a 16-bit input may come with float32 weight and bias: Note [Mixed-dtype layer norm])");
}

// Note [Mixed-dtype layer norm]
// A float32 LayerNorm may be given a 16-bit input: under CPU autocast after a product whose
// output is bfloat16 (BERT's prediction head: Linear, GELU, LayerNorm), or a 16-bit activation
// fed to a float32 module. PyTorch computes that in float32 and rounds the output once to the
// input's dtype; so does ember, by running the float32 layer norm on the widened input (the casts
// carry the gradient: x's comes back in x's dtype, the weight's and bias's in float32). Only
// float32 affine tensors with a 16-bit input mix; any other pair of dtypes is refused.
bool mixed_dtype(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!is_sixteen_bit(x.dtype()) || (!weight.defined() && !bias.defined())) return false;
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && t->dtype() != kFloat32) return false;
  return true;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  ops::check_defined(x, "layer_norm");
  ops::check_floating(x, "layer_norm");
  if (autocast::OpCast cast{"layer_norm", x})  // float32 on CUDA
    return layer_norm(cast(x), normalized_shape, cast(weight), cast(bias), eps);
  const auto n = static_cast<int64_t>(normalized_shape.size());
  bool trailing = n >= 1 && n <= x.dim();
  for (int64_t i = 0; trailing && i < n; ++i) trailing = x.size(x.dim() - n + i) == normalized_shape[static_cast<size_t>(i)];
  EMBER_CHECK(trailing, "[layer_norm] normalized_shape ", shape_str(normalized_shape),
              " must be the trailing dims of the input of shape ", shape_str(x.shape()));
  EMBER_CHECK(std::isfinite(eps) && eps > 0.0, "[layer_norm] eps must be finite and > 0, got ", eps);
  if (mixed_dtype(x, weight, bias))
    return layer_norm(x.to(kFloat32), normalized_shape, weight, bias, eps).to(x.dtype());
  check_affine(weight, x, normalized_shape, "weight");
  check_affine(bias, x, normalized_shape, "bias");
  return LayerNorm::apply(x.contiguous(), weight.defined() ? weight.contiguous() : weight,
                          bias.defined() ? bias.contiguous() : bias, numel_of(normalized_shape), eps);
}

}  // namespace ember
