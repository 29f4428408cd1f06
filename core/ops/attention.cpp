// Scaled dot-product attention: the argument checks, the choice between the fused kernels (Note
// [Fused attention] in core/ops/fused_attention.cpp) and the math path, and the math path itself,
// composed of differentiable ops (matmul, a fused scaled and causal softmax, or a scaling, where
// or add and that softmax for an explicit mask, dropout), each with CPU and CUDA kernels.
#include <cmath>
#include <limits>

#include "core/attention_backend.h"
#include "core/autocast.h"
#include "core/autograd/engine.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/fused_attention.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

std::string shapes_of(const Tensor& q, const Tensor& k) {
  return "query " + shape_str(q.shape()) + ", key " + shape_str(k.shape());
}

void check_query_and_key(const Tensor& q, const Tensor& k) {
  ops::check_defined(q, kOp, "query");
  ops::check_defined(k, kOp, "key");
  ops::check_floating(q, kOp);
  EMBER_CHECK(k.dtype() == q.dtype(), "[", kOp, "] query and key must have one dtype, got ", q.dtype(), " and ",
              k.dtype());
  ops::check_same_device(q, k, kOp);
  EMBER_CHECK(q.dim() >= 2 && k.dim() == q.dim(), "[", kOp, "] expects query [..., L, E] and key [..., S, E] with "
              "the same number of dims (at least 2), got query ", shape_str(q.shape()), ", key ", shape_str(k.shape()));
  EMBER_CHECK(Shape(k.shape().begin(), k.shape().end() - 2) == Shape(q.shape().begin(), q.shape().end() - 2),
              "[", kOp, "] query and key must have the same leading dims, got query ", shape_str(q.shape()),
              ", key ", shape_str(k.shape()));
  EMBER_CHECK(k.size(-1) == q.size(-1), "[", kOp, "] key's head dim ", k.size(-1), " differs from query's ",
              q.size(-1), ": query ", shape_str(q.shape()), ", key ", shape_str(k.shape()));
}

void check_value(const Tensor& q, const Tensor& k, const Tensor& v) {
  ops::check_defined(v, kOp, "value");
  auto shapes = [&] {
    return shapes_of(q, k) + ", value " + shape_str(v.shape());
  };
  EMBER_CHECK(v.dtype() == q.dtype(), "[", kOp, "] query, key and value must have one dtype, got ", q.dtype(), ", ",
              k.dtype(), " and ", v.dtype());
  ops::check_same_device(q, v, kOp);
  EMBER_CHECK(v.dim() == q.dim() && Shape(v.shape().begin(), v.shape().end() - 2) ==
                                        Shape(q.shape().begin(), q.shape().end() - 2),
              "[", kOp, "] expects value [..., S, Ev] with query's and key's leading dims, got ", shapes());
  EMBER_CHECK(v.size(-2) == k.size(-2), "[", kOp, "] value has ", v.size(-2), " positions but key has ", k.size(-2),
              ": ", shapes());
}

void check_mask(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal) {
  if (!attn_mask.defined()) return;
  EMBER_CHECK(!is_causal, "[", kOp, "] takes attn_mask or is_causal, not both (as PyTorch): fold the causal pattern "
              "into the mask with causal_attn_mask");
  Shape scores_shape = q.shape();
  scores_shape.back() = k.size(-2);
  ops::check_same_device(attn_mask, q, kOp);
  EMBER_CHECK(attn_mask.dtype() == kUInt8 || attn_mask.dtype() == q.dtype(), "[", kOp, "] attn_mask must be uint8 "
              "or ", q.dtype(), " like the query, got ", attn_mask.dtype());
  EMBER_CHECK(ops::broadcasts_to(attn_mask.shape(), scores_shape), "[", kOp, "] attn_mask of shape ",
              shape_str(attn_mask.shape()), " does not broadcast to the scores' shape ", shape_str(scores_shape),
              " (query ", shape_str(q.shape()), ", key ", shape_str(k.shape()), ")");
}

// Note [Scaled causal softmax]
// Without an explicit mask, the scores go through one op, softmax(scale * scores) with the causal
// mask applied inside the kernel (kernels::SoftmaxSpec: row i of each [L, S] matrix sees keys
// j <= i), instead of a scaling, a where() against a uint8 mask and a softmax. That is one pass
// over the [..., L, S] scores instead of three forward, one instead of three backward (the fused
// softmax_backward kernel, which applies the scale and zeroes the masked entries), and no scaled
// or masked copy of the scores, not even for a moment. The values are those of the composed ops
// up to rounding: each row's maximum and sum run over its visible columns only, which the -inf
// entries of the composed version did not change either. With an explicit mask the scores are
// scaled and masked first and this op runs with scale 1, for its handling of empty rows.
//
// Note [Rows that attend to nothing]
// A query whose every key is masked has a row of -inf scores, and softmax's exp(-inf - -inf) makes
// it NaN. PyTorch's math path (since 2.5, checked with 2.15 on the CPU) gives such a row zeros
// instead, and its gradient is zero: a padded query then yields 0 rather than poisoning a loss or
// a sum with NaN. The kernel does that itself (SoftmaxSpec::empty_rows_masked): a row whose maximum
// is -inf is written as masked everywhere. The backward needs nothing new: the weights y are 0
// there, so y * (g - sum(g * y)) is 0. Plain softmax() keeps PyTorch's NaN for such a row.
//
// Note [Softmax over the scores]
// The scores are a temporary of attention's own: nothing reads them after the softmax (the
// product that made them saved q and k, not its output). So the weights are written over them,
// when nothing else refers to their memory: no view, no saved copy, no output a checkpoint policy
// kept (which the recompute would replay, so it must keep its values; all of those hold the
// storage too). The kernel reads each element of a row before it writes it. That spares the
// allocation and the first write of a buffer as large as the scores, which makes the GPT's softmax
// faster (bench/RESULTS.md, "Figures that code comments used to quote"), and a recompute holds
// one such buffer less at its peak.

struct ScaledSoftmax : Function<ScaledSoftmax> {
  static constexpr const char* name = "scaled_softmax";
  struct State {
    kernels::SoftmaxSpec spec;
    autograd::SavedRef probabilities;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& scores, double scale, bool causal) {
    const Tensor in = scores.contiguous();
    s.spec = {.log = false, .scale = scale, .causal_rows = causal ? scores.size(-2) : 0, .empty_rows_masked = true};
    // Note [Softmax over the scores]
    const bool over_scores = in.numel() > 0 && autograd::sole_tensor_on_its_memory(in);
    Tensor y = over_scores ? in.detach() : ops::empty_on(in.shape(), in.dtype(), in.device());
    if (y.numel() > 0) kernels::softmax[in.device()](in, y, s.spec);
    if (over_scores) y.storage()->bump_version();
    s.probabilities = c.save(y);
    return y;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const Tensor y = c.get(s.probabilities);
    // Over g when no one else holds it: attention's backward then holds two buffers of the
    // scores' size at its peak (the probabilities and this gradient), not three.
    return {ops::softmax_backward(y, g, y.dim() - 1, s.spec, autograd::gradient_is_reusable(g))};
  }
};

double checked_scale(const Tensor& q, std::optional<double> scale) {
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  EMBER_CHECK(std::isfinite(s), "[", kOp, "] scale must be finite, got ", s);
  return s;
}

// Note [Float16 attention scores]
// float16 holds nothing past 65504, and a product of two rows of a head (64 terms of a few units
// each) passes that easily before it is scaled: stored as float16 the score is inf, and softmax
// turns inf - inf into NaN. PyTorch's CPU attention accumulates the scores in float32 and gives
// the answer. So float16 queries and keys make their scores, mask and softmax in float32, and
// only the weights round to float16 for the product with v (as PyTorch's fused kernels keep
// their scores in float32 too). The price is a float32 [..., L, S] buffer while the weights are
// made, and the casts of q and k; bfloat16, with float32's range, keeps its scores in bfloat16.

// Whether this call runs on the fused kernels (core/attention_backend.h).
bool runs_fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask) {
  const AttentionBackend backend = attention_backend();
  if (backend == AttentionBackend::Math) return false;
  const std::string refusal = ops::fused_attention_refusal(q, k, v, attn_mask, backend);
  EMBER_CHECK(refusal.empty() || backend == AttentionBackend::Auto, "[", kOp, "] the fused backend was chosen "
              "(set_attention_backend or EMBER_ATTENTION_BACKEND) but cannot take this call: ", refusal, " (",
              shapes_of(q, k), ")");
  return refusal.empty();
}

// The weights, with the inputs checked and cast already.
Tensor weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal, double scale) {
  if (q.dtype() == kFloat16) {
    const Tensor mask = attn_mask.defined() && attn_mask.dtype() == kFloat16 ? attn_mask.to(kFloat32) : attn_mask;
    return weights(q.to(kFloat32), k.to(kFloat32), mask, is_causal, scale).to(kFloat16);
  }
  const Tensor scores = matmul(q, k.transpose(-2, -1));
  if (!attn_mask.defined()) return ScaledSoftmax::apply(scores, scale, is_causal);
  Tensor masked = scores * scale;
  if (attn_mask.dtype() == kUInt8)
    masked = where(attn_mask, masked, ops::wrap_scalar(-std::numeric_limits<double>::infinity(), masked));
  else
    masked = masked + attn_mask;
  return ScaledSoftmax::apply(masked, 1.0, false);
}

}  // namespace

// Note [What attention saves]
// The math path is composed so that its backward keeps what PyTorch's math path keeps, no more:
//   scores = q @ k^T                  saves q and k^T (a view: k's memory)
// then, with no explicit mask (causal or not), one op (Note [Scaled causal softmax]):
//   attn = softmax(scale * scores)    saves attn
// or, with an attn_mask:
//   scores * scale                    saves nothing (the scale is a number)
//   scores + float mask               saves nothing
//   where(allowed, scores, -inf)      saves the uint8 mask, in its own (unbroadcast) shape
//   attn = softmax(scores)            saves attn (the op above with scale 1)
// then, with dropout_p > 0,
//   dropped = dropout(attn)           saves its uint8 keep mask [..., L, S]
// and last
//   out = dropped @ v                 saves dropped (without dropout: attn, the same tensor, no new
//                                     memory) and v
// So the graph holds q, k, v, the attention weights [..., L, S], with a boolean attn_mask the mask,
// and with dropout the keep mask and the dropped weights, as PyTorch's math path holds its dropout
// mask and the dropped weights. The raw scores, as large as the weights, are the memory the
// softmax writes the weights into (Note [Softmax over the scores]) or, when something else holds
// them, are freed as soon as it has run (and with a mask so are the scaled and masked ones).
// (Scaling q before the product would instead keep a scaled copy of q for the matmul.) A float16
// attention keeps float32 copies of q and k and float32 weights instead (Note [Float16 attention
// scores]).
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal,
                         std::optional<double> scale) {
  if (autocast::OpCast cast{kOp, q}) return attention_weights(cast(q), cast(k), cast(attn_mask), is_causal, scale);
  check_query_and_key(q, k);
  check_mask(q, k, attn_mask, is_causal);
  EMBER_CHECK(attention_backend() != AttentionBackend::Fused, "[", kOp, "] the attention weights were asked for "
              "(need_weights), which only the math path makes, but the fused backend was chosen (", shapes_of(q, k),
              "): set AttentionBackend::Auto or Math");
  return weights(q, k, attn_mask, is_causal, checked_scale(q, scale));
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale) {
  if (autocast::OpCast cast{kOp, q})
    return scaled_dot_product_attention(cast(q), cast(k), cast(v), cast(attn_mask), dropout_p, is_causal, scale);
  check_query_and_key(q, k);
  check_value(q, k, v);
  check_mask(q, k, attn_mask, is_causal);
  EMBER_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "[", kOp, "] dropout_p has to be between 0 and 1, but got ",
              dropout_p);
  const double s = checked_scale(q, scale);
  if (runs_fused(q, k, v, attn_mask)) return ops::fused_attention(q, k, v, attn_mask, dropout_p, is_causal, s);
  return matmul(dropout(weights(q, k, attn_mask, is_causal, s), dropout_p), v);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    const Tensor& attn_mask, std::optional<double> scale) {
  if (causal && attn_mask.defined())
    return scaled_dot_product_attention(q, k, v, causal_attn_mask(attn_mask, q.size(-2), k.size(-2)), 0.0, false,
                                        scale);
  return scaled_dot_product_attention(q, k, v, attn_mask, 0.0, causal, scale);
}

Tensor causal_attn_mask(const Tensor& attn_mask, int64_t L, int64_t S) {
  ops::check_defined(attn_mask, "causal_attn_mask", "attn_mask");
  EMBER_CHECK(L >= 0 && S >= 0, "[causal_attn_mask] L and S must be >= 0, got ", L, " and ", S);
  const Shape& shape = attn_mask.shape();
  const bool fits = (shape.size() < 1 || shape.end()[-1] == 1 || shape.end()[-1] == S) &&
                    (shape.size() < 2 || shape.end()[-2] == 1 || shape.end()[-2] == L);
  EMBER_CHECK(fits, "[causal_attn_mask] attn_mask of shape ", shape_str(shape), " does not broadcast with [L, S] = ",
              shape_str({L, S}));
  const Tensor lower = tril(ones({L, S}, TensorOptions(kUInt8).with_device(attn_mask.device())));
  if (attn_mask.dtype() == kUInt8) return attn_mask * lower;
  return where(lower, attn_mask, ops::wrap_scalar(-std::numeric_limits<double>::infinity(), attn_mask));
}

}  // namespace ember
