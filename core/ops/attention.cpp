// Scaled dot-product attention, the math path: composed of differentiable ops (matmul, where,
// softmax), each of which already has CPU and CUDA kernels.
#include <cmath>
#include <limits>

#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

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

}  // namespace

// Note [What attention saves]
// The attention is composed so that its backward keeps what PyTorch's math path keeps, no more:
//   scores = q @ k^T                  saves q and k^T (a view: k's memory)
//   scores * scale                    saves nothing (the scale is a number)
//   scores + float mask               saves nothing
//   where(allowed, scores, -inf)      saves the uint8 mask, in its own (unbroadcast) shape
//   attn = softmax(scores, -1)        saves attn
//   attn @ v                          saves attn (the same tensor: no new memory) and v
// So the graph holds q, k, v, the attention weights [..., L, S] and the mask. The raw, scaled
// and masked scores, each as large as the weights, are freed as soon as the next op has run.
// (Scaling q before the product would instead keep a scaled copy of q for the matmul.)
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    const Tensor& attn_mask, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  check_attention_inputs(q, k, v);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  EMBER_CHECK(std::isfinite(s), "[", op, "] scale must be finite, got ", s);
  Shape scores_shape = q.shape();
  scores_shape.back() = k.size(-2);
  Tensor allowed;  // uint8, 1 where a query may attend to a key
  Tensor additive;  // floating, added to the scores
  if (attn_mask.defined()) {
    ops::check_same_device(attn_mask, q, op);
    EMBER_CHECK(attn_mask.dtype() == kUInt8 || attn_mask.dtype() == q.dtype(), "[", op, "] attn_mask must be uint8 "
                "or ", q.dtype(), " like the query, got ", attn_mask.dtype());
    EMBER_CHECK(ops::broadcasts_to(attn_mask.shape(), scores_shape), "[", op, "] attn_mask of shape ",
                shape_str(attn_mask.shape()), " does not broadcast to the scores' shape ", shape_str(scores_shape),
                " (query ", shape_str(q.shape()), ", key ", shape_str(k.shape()), ")");
    (attn_mask.dtype() == kUInt8 ? allowed : additive) = attn_mask;
  }
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
