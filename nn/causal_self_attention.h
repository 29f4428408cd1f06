#pragma once
#include "nn/linear.h"

namespace ember::nn {

// Note [Multi-head self-attention]
// GPT's fused self-attention (nn::MultiheadAttention is PyTorch's general one, with separate query,
// key and value inputs, masks and need_weights, nn/attention.h).
// x [batch, seq, embed_dim] -> [batch, seq, embed_dim]. One fused projection qkv = Linear(d, 3d)
// makes queries, keys and values in one matmul; its output is cut into q, k, v along the last dim
// and each into num_heads heads of head_dim = d / num_heads columns ([batch, heads, seq, head_dim],
// views, no copy); scaled_dot_product_attention runs all heads at once, the heads are put side by
// side again and out_proj = Linear(d, d) mixes them. The weights line up with PyTorch's
// nn.MultiheadAttention (and ember's): qkv.weight/bias are its in_proj_weight/in_proj_bias (q, k, v stacked
// in that order, head h in columns [h * head_dim, (h + 1) * head_dim) of each), out_proj is its
// out_proj. With causal (the default) position i attends to positions <= i, a GPT's
// self-attention. dropout is applied to the output (nanoGPT's residual dropout) in training mode,
// not to the attention weights. It was called nn::MultiheadAttention until PyTorch's layer took the
// name (CHANGELOG.md).
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool causal = true, bool bias = true);
  Tensor forward(const Tensor& x) override;
  // attn_mask broadcasts to [batch, num_heads, seq, seq]: uint8 (1 = may attend) or floating
  // (added to the scores); with causal it narrows the causal mask further (causal_attn_mask).
  Tensor forward(const Tensor& x, const Tensor& attn_mask);

  const int64_t embed_dim, num_heads, head_dim;
  const double dropout;
  const bool causal;
  Linear qkv, out_proj;

 protected:
  std::string extra_repr() const override;
};

}  // namespace ember::nn
