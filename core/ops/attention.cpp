// Scaled dot-product attention, the math path: composed of differentiable ops (matmul, a fused
// scaled and causal softmax, or where and softmax for an explicit mask), each with CPU and CUDA
// kernels.
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

void check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* op = "scaled_dot_product_attention";
  ops::check_defined(q, op, "query");
  ops::check_defined(k, op, "key");
  ops::check_defined(v, op, "value");
  ops::check_floating(q, op);
  EMBER_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), "[", op, "] query, key and value must have one "
              "dtype, got ", q.dtype(), ", ", k.dtype(), " and ", v.dtype());
  ops::check_same_device(q, k, op);
  ops::check_same_device(q, v, op);
  auto shapes = [&] {
    return "query " + shape_str(q.shape()) + ", key " + shape_str(k.shape()) + ", value " + shape_str(v.shape());
  };
  EMBER_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), "[", op, "] expects query [..., L, E], "
              "key [..., S, E] and value [..., S, Ev] with the same number of dims (at least 2), got ", shapes());
  const Shape batch(q.shape().begin(), q.shape().end() - 2);
  EMBER_CHECK(Shape(k.shape().begin(), k.shape().end() - 2) == batch &&
                  Shape(v.shape().begin(), v.shape().end() - 2) == batch,
              "[", op, "] query, key and value must have the same leading dims, got ", shapes());
  EMBER_CHECK(k.size(-1) == q.size(-1), "[", op, "] key's head dim ", k.size(-1), " differs from query's ",
              q.size(-1), ": ", shapes());
  EMBER_CHECK(v.size(-2) == k.size(-2), "[", op, "] value has ", v.size(-2), " positions but key has ", k.size(-2),
              ": ", shapes());
}

// Note [Scaled causal softmax]
// Without an explicit mask, the scores go through one op, softmax(scale * scores) with the causal
// mask applied inside the kernel (kernels::SoftmaxSpec: row i of each [L, S] matrix sees keys
// j <= i), instead of a scaling, a where() against a uint8 mask and a softmax. That is one pass
// over the [..., L, S] scores instead of three forward, one instead of three backward (the fused
// softmax_backward kernel, which applies the scale and zeroes the masked entries), and no scaled
// or masked copy of the scores, not even for a moment. The values are those of the composed ops
// up to rounding: each row's maximum and sum run over its visible columns only, which the -inf
// entries of the composed version did not change either.
struct ScaledSoftmax : Function<ScaledSoftmax> {
  static constexpr const char* name = "scaled_softmax";
  struct State {
    kernels::SoftmaxSpec spec;
    autograd::SavedRef probabilities;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& scores, double scale, bool causal) {
    const Tensor in = scores.contiguous();
    s.spec = {.log = false, .scale = scale, .causal_rows = causal ? scores.size(-2) : 0};
    Tensor y = ops::empty_on(in.shape(), in.dtype(), in.device());
    if (y.numel() > 0) kernels::softmax[in.device()](in, y, s.spec);
    s.probabilities = c.save(y);
    return y;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const Tensor y = c.get(s.probabilities);
    return {ops::softmax_backward(y, g, y.dim() - 1, s.spec)};
  }
};

}  // namespace

// Note [What attention saves]
// The attention is composed so that its backward keeps what PyTorch's math path keeps, no more:
//   scores = q @ k^T                  saves q and k^T (a view: k's memory)
// then, with no explicit mask (causal or not), one op (Note [Scaled causal softmax]):
//   attn = softmax(scale * scores)    saves attn
// or, with an attn_mask:
//   scores * scale                    saves nothing (the scale is a number)
//   scores + float mask               saves nothing
//   where(allowed, scores, -inf)      saves the uint8 mask, in its own (unbroadcast) shape
//   attn = softmax(scores, -1)        saves attn
// and last
//   attn @ v                          saves attn (the same tensor: no new memory) and v
// So the graph holds q, k, v, the attention weights [..., L, S] and, with a boolean attn_mask,
// the mask. The raw scores, as large as the weights, are freed as soon as the softmax has run
// (and with a mask so are the scaled and masked ones). (Scaling q before the product would
// instead keep a scaled copy of q for the matmul.)
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    const Tensor& attn_mask, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  if (autocast::OpCast cast{op, q}) return scaled_dot_product_attention(cast(q), cast(k), cast(v), causal, cast(attn_mask), scale);
  check_attention_inputs(q, k, v);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  EMBER_CHECK(std::isfinite(s), "[", op, "] scale must be finite, got ", s);
  if (!attn_mask.defined()) return matmul(ScaledSoftmax::apply(matmul(q, k.transpose(-2, -1)), s, causal), v);

  Shape scores_shape = q.shape();
  scores_shape.back() = k.size(-2);
  ops::check_same_device(attn_mask, q, op);
  EMBER_CHECK(attn_mask.dtype() == kUInt8 || attn_mask.dtype() == q.dtype(), "[", op, "] attn_mask must be uint8 "
              "or ", q.dtype(), " like the query, got ", attn_mask.dtype());
  EMBER_CHECK(ops::broadcasts_to(attn_mask.shape(), scores_shape), "[", op, "] attn_mask of shape ",
              shape_str(attn_mask.shape()), " does not broadcast to the scores' shape ", shape_str(scores_shape),
              " (query ", shape_str(q.shape()), ", key ", shape_str(k.shape()), ")");
  Tensor allowed;   // uint8, 1 where a query may attend to a key
  Tensor additive;  // floating, added to the scores
  (attn_mask.dtype() == kUInt8 ? allowed : additive) = attn_mask;
  if (causal) {
    Tensor lower = tril(ones({q.size(-2), k.size(-2)}, TensorOptions(kUInt8).with_device(q.device())));
    allowed = allowed.defined() ? allowed * lower : lower;
  }
  Tensor scores = matmul(q, k.transpose(-2, -1)) * s;
  if (additive.defined()) scores = scores + additive;
  if (allowed.defined())
    scores = where(allowed, scores, ops::wrap_scalar(-std::numeric_limits<double>::infinity(), scores));
  return matmul(softmax(scores, -1), v);
}

}  // namespace ember
