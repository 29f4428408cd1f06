#include "nn/attention.h"

#include <cmath>

#include "nn/init.h"

namespace ember::nn {

int64_t attention_head_dim(int64_t embed_dim, int64_t num_heads, const char* layer) {
  EMBER_CHECK(embed_dim > 0 && num_heads > 0, "[", layer, "] embed_dim and num_heads must be positive, got ",
              embed_dim, " and ", num_heads);
  EMBER_CHECK(embed_dim % num_heads == 0, "[", layer, "] embed_dim ", embed_dim, " must be divisible by num_heads ",
              num_heads);
  return embed_dim / num_heads;
}

namespace {

constexpr const char* kLayer = "MultiheadAttention";

int64_t checked_dim(std::optional<int64_t> dim, int64_t embed_dim, const char* what) {
  EMBER_CHECK(!dim || *dim > 0, "[", kLayer, "] ", what, " must be positive, got ", dim.value_or(0));
  return dim.value_or(embed_dim);
}

// A mask in PyTorch's module convention (uint8: nonzero = may not attend) as an additive one.
Tensor additive(const Tensor& mask, DType dtype) {
  if (mask.dtype() != kUInt8) return mask;
  return masked_fill(zeros(mask.shape(), TensorOptions(dtype).with_device(mask.device())), mask, -INFINITY);
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t d, int64_t heads, double p, bool bias, std::optional<int64_t> k,
                                       std::optional<int64_t> v, bool batch_first)
    : embed_dim(d), num_heads(heads), head_dim(attention_head_dim(d, heads, kLayer)),
      kdim(checked_dim(k, d, "kdim")), vdim(checked_dim(v, d, "vdim")), dropout(p), batch_first(batch_first),
      out_proj(d, d, bias) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "[", kLayer, "] dropout has to be between 0 and 1, but got ", p);
  // PyTorch reads a kdim without a vdim as vdim = embed_dim; a key width given alone is more often
  // a forgotten value width, so ember asks for both.
  EMBER_CHECK(k.has_value() == v.has_value(), "[", kLayer, "] kdim and vdim go together: got ",
              k ? "kdim " + std::to_string(*k) + " without vdim" : "vdim " + std::to_string(v.value_or(0)) + " without kdim",
              " (pass the other as embed_dim ", d, " for keys or values of the query's width)");
  // Registered in PyTorch's order, so state_dict() lists the keys as torch's does.
  if (kdim == d && vdim == d) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * d, d}));
    init::xavier_uniform_(in_proj_weight);
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({d, d}));
    k_proj_weight = register_parameter("k_proj_weight", empty({d, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({d, vdim}));
    for (const Tensor& w : {q_proj_weight, k_proj_weight, v_proj_weight}) init::xavier_uniform_(w);
  }
  if (bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * d}));
  register_module("out_proj", out_proj);
  if (bias) init::zeros_(out_proj.bias);
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x, Tensor(), false).first; }

Tensor MultiheadAttention::merged_mask(const Tensor& key_padding_mask, const Tensor& attn_mask, const Tensor& q,
                                       int64_t S, bool batched) const {
  const int64_t N = q.size(0), L = q.size(1);
  auto check_dtype = [&](const Tensor& m, const char* name) {
    EMBER_CHECK(m.device() == q.device(), "[", kLayer, "] ", name, " is on ", m.device(), " but the query is on ",
                q.device());
    EMBER_CHECK(m.dtype() == kUInt8 || m.dtype() == q.dtype(), "[", kLayer, "] ", name, " must be uint8 (ember's "
                "bool: nonzero = may not attend) or ", q.dtype(), " like the query, got ", m.dtype());
  };
  Tensor padding, pattern;  // both as [N or 1, num_heads or 1, L or 1, S]
  if (key_padding_mask.defined()) {
    check_dtype(key_padding_mask, "key_padding_mask");
    const Shape want = batched ? Shape{N, S} : Shape{S};
    EMBER_CHECK(key_padding_mask.shape() == want, "[", kLayer, "] key_padding_mask must be ",
                batched ? "[N, S] = " : "[S] = ", shape_str(want), ", got ", shape_str(key_padding_mask.shape()));
    padding = key_padding_mask.reshape({N, 1, 1, S});
  }
  if (attn_mask.defined()) {
    check_dtype(attn_mask, "attn_mask");
    const Shape per_head = batched ? Shape{N * num_heads, L, S} : Shape{num_heads, L, S};
    EMBER_CHECK(attn_mask.shape() == Shape({L, S}) || attn_mask.shape() == per_head, "[", kLayer,
                "] attn_mask must be [L, S] = ", shape_str({L, S}), batched ? " or [N * num_heads, L, S] = "
                : " or [num_heads, L, S] = ", shape_str(per_head), ", got ", shape_str(attn_mask.shape()));
    pattern = attn_mask.dim() == 2 ? attn_mask : attn_mask.reshape({N, num_heads, L, S});
  }
  if (!padding.defined() || !pattern.defined()) {
    const Tensor& only = padding.defined() ? padding : pattern;
    if (!only.defined() || only.dtype() != kUInt8) return only;
    return only == 0.0;  // scaled_dot_product_attention's uint8 masks say where a query may attend
  }
  if (padding.dtype() == kUInt8 && pattern.dtype() == kUInt8) return (padding == 0.0) * (pattern == 0.0);
  return additive(padding, q.dtype()) + additive(pattern, q.dtype());
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const Tensor& key_padding_mask, bool need_weights,
                                                      const Tensor& attn_mask, bool average_attn_weights,
                                                      bool is_causal) {
  auto shapes = [&] {
    return "query " + shape_str(query.shape()) + ", key " + shape_str(key.shape()) + ", value " +
           shape_str(value.shape());
  };
  EMBER_CHECK(query.defined() && key.defined() && value.defined(), "[", kLayer, "] query, key and value must be "
              "defined");
  EMBER_CHECK((query.dim() == 2 || query.dim() == 3) && key.dim() == query.dim() && value.dim() == query.dim(),
              "[", kLayer, "] expects query, key and value of 3 dims ([L, N, E], [N, L, E] with batch_first) or 2 "
              "(unbatched [L, E]), got ", shapes());
  EMBER_CHECK(!is_causal || attn_mask.defined(), "[", kLayer, "] is_causal is a hint that attn_mask is the causal "
              "mask, as in PyTorch: give the mask too");
  const bool batched = query.dim() == 3;
  // [N, L, E] whatever the layout the caller uses
  auto batch_major = [&](const Tensor& t) { return !batched ? t.unsqueeze(0) : batch_first ? t : t.transpose(0, 1); };
  const Tensor q = batch_major(query), k = batch_major(key), v = batch_major(value);
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1);
  EMBER_CHECK(q.size(2) == embed_dim && k.size(2) == kdim && v.size(2) == vdim, "[", kLayer, "] expects query, key "
              "and value with ", embed_dim, ", ", kdim, " and ", vdim, " features (embed_dim, kdim, vdim), got ",
              shapes());
  EMBER_CHECK(k.size(0) == N && v.size(0) == N && v.size(1) == S, "[", kLayer, "] query, key and value must have "
              "one batch size and key and value one length, got ", shapes());

  Tensor qp, kp, vp;  // the projections, [N, L or S, E]
  const std::vector<Tensor> biases = in_proj_bias.defined() ? chunk(in_proj_bias, 3) : std::vector<Tensor>(3);
  if (in_proj_weight.defined() && query.is_same(key) && key.is_same(value)) {
    const std::vector<Tensor> parts = chunk(linear(q, in_proj_weight, in_proj_bias), 3, -1);  // one matmul
    qp = parts[0], kp = parts[1], vp = parts[2];
  } else {
    const std::vector<Tensor> weights = in_proj_weight.defined()
                                            ? chunk(in_proj_weight, 3)
                                            : std::vector<Tensor>{q_proj_weight, k_proj_weight, v_proj_weight};
    qp = linear(q, weights[0], biases[0]), kp = linear(k, weights[1], biases[1]), vp = linear(v, weights[2], biases[2]);
  }
  auto split_heads = [&](const Tensor& t) { return t.reshape({N, t.size(1), num_heads, head_dim}).transpose(1, 2); };
  const Tensor qh = split_heads(qp), kh = split_heads(kp), vh = split_heads(vp);

  const bool fused_causal = is_causal && !key_padding_mask.defined();
  Tensor mask = merged_mask(key_padding_mask, attn_mask, q, S, batched);
  if (fused_causal) mask = Tensor();
  const double p = is_training() ? dropout : 0.0;
  Tensor heads, weights;  // [N, num_heads, L, head_dim], [N, num_heads, L, S]
  if (need_weights) {
    weights = ember::dropout(attention_weights(qh, kh, mask, fused_causal), p);
    heads = matmul(weights, vh);
  } else {
    heads = scaled_dot_product_attention(qh, kh, vh, mask, p, fused_causal);
  }
  Tensor out = out_proj(heads.transpose(1, 2).reshape({N, L, embed_dim}));
  out = !batched ? out.squeeze(0) : batch_first ? out : out.transpose(0, 1);
  if (weights.defined()) {
    if (average_attn_weights) weights = mean(weights, Shape{1});
    if (!batched) weights = weights.squeeze(0);
  }
  return {out, weights};
}

}  // namespace ember::nn
