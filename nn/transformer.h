#pragma once
#include "nn/causal_self_attention.h"
#include "nn/layer_norm.h"
#include "nn/sequential.h"

namespace ember::nn {

// A pre-LayerNorm transformer block (GPT-2's):
//   x = x + attn(ln1(x))
//   x = x + mlp(ln2(x)),   mlp = Linear(d, 4d), GELU, Linear(4d, d), Dropout
// Normalising before each sublayer leaves the residual path an identity from the embeddings to
// the last block, which is what lets deep stacks train without a learning-rate warm-up dance.
// attn is a CausalSelfAttention (Note [Multi-head self-attention]); dropout applies to both
// sublayers' outputs. Input and output [batch, seq, d].
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t embed_dim, int64_t num_heads, double dropout = 0.0);
  Tensor forward(const Tensor& x) override;

  LayerNorm ln1;
  CausalSelfAttention attn;
  LayerNorm ln2;
  Sequential mlp;
};

}  // namespace ember::nn
