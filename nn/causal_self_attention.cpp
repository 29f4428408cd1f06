#include "nn/causal_self_attention.h"

#include "nn/attention.h"
#include "nn/repr.h"

namespace ember::nn {

CausalSelfAttention::CausalSelfAttention(int64_t d, int64_t heads, double p, bool causal, bool bias)
    : embed_dim(d), num_heads(heads), head_dim(attention_head_dim(d, heads, "CausalSelfAttention")),
      dropout(p), causal(causal), qkv(d, 3 * d, bias), out_proj(d, d, bias) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "[CausalSelfAttention] dropout has to be between 0 and 1, but got ", p);
  register_module("qkv", qkv);
  register_module("out_proj", out_proj);
}

Tensor CausalSelfAttention::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& attn_mask) {
  EMBER_CHECK(x.defined() && x.dim() == 3 && x.size(2) == embed_dim,
              "[CausalSelfAttention] expected input [batch, seq, ", embed_dim, "], got shape ",
              x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t batch = x.size(0), seq = x.size(1);
  // [batch, seq, 3d] -> three [batch, seq, d] -> each [batch, heads, seq, head_dim]
  std::vector<Tensor> parts = chunk(qkv(x), 3, -1);
  for (Tensor& t : parts) t = t.reshape({batch, seq, num_heads, head_dim}).transpose(1, 2);
  const bool both = causal && attn_mask.defined();
  const Tensor mask = both ? causal_attn_mask(attn_mask, seq, seq) : attn_mask;
  Tensor heads = scaled_dot_product_attention(parts[0], parts[1], parts[2], mask, 0.0, causal && !both);
  Tensor y = out_proj(heads.transpose(1, 2).reshape({batch, seq, embed_dim}));
  return ember::dropout(y, dropout, is_training());
}

std::string CausalSelfAttention::extra_repr() const {
  return detail::concat("embed_dim=", embed_dim, ", num_heads=", num_heads, ", dropout=", dropout,
                        ", causal=", bool_repr(causal));
}

}  // namespace ember::nn
