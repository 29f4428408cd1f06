#pragma once
// A small GPT (decoder-only transformer) for the character-level example, shared with the tests.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "optim/adamw.h"

namespace ember::examples {

struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t context = 128;  // the longest sequence: the position table's size
  int64_t embed_dim = 128;
  int64_t num_heads = 4;
  int64_t num_layers = 4;
  double dropout = 0.0;
};

// Note [A small GPT]
// ids int64 [batch, seq] -> logits [batch, seq, vocab_size], the scores of each position's next
// token:
//   h = drop(tok_emb(ids) + pos_emb(0..seq-1))       the stem
//   h = blocks[i](h), i = 0..num_layers-1            pre-LayerNorm causal TransformerBlocks
//   logits = lm_head(ln_f(h))                        the head
// The head is untied: lm_head has its own [vocab, d] weight instead of reusing tok_emb's. Tying
// saves vocab * d parameters, which matters for a 50k-token vocabulary and not for ~100
// characters, and a module registry that lists one tensor under two names would hand it to the
// optimizer twice. Initialisation follows GPT-2: every Linear and Embedding weight N(0, 0.02),
// biases zero, and the two projections that write into the residual stream (attn.out_proj and
// the MLP's second Linear) N(0, 0.02 / sqrt(2 * num_layers)), so the residual's variance does
// not grow with depth.
struct GPT : nn::Module {
  explicit GPT(const GPTConfig& config);
  Tensor forward(const Tensor& ids) override;
  // The parts around `blocks`, for callers that run the blocks themselves (checkpointing).
  Tensor stem_forward(const Tensor& ids);
  Tensor head_forward(const Tensor& h);

  const GPTConfig config;
  nn::Embedding tok_emb, pos_emb;
  nn::Dropout drop;
  nn::ModuleList blocks;
  nn::LayerNorm ln_f;
  nn::Linear lm_head;
};

// AdamW's parameter groups as nanoGPT makes them: weight decay for the Linear layers' weights
// (the matmul weights) only; biases, LayerNorm weights and embeddings in a group without decay.
std::vector<optim::AdamWParamGroup> gpt_param_groups(nn::Module& model, const optim::AdamWOptions& options);

// Continues `prompt` (ids) by `length` tokens, one at a time, in eval mode and without autograd:
// each step feeds the last config.context tokens, divides the last position's logits by
// `temperature`, keeps the top_k largest (all when top_k is 0) and draws from their softmax with
// the default CPU generator (seed it for a reproducible sample). Returns prompt + continuation.
std::vector<int64_t> generate(GPT& model, std::vector<int64_t> prompt, int64_t length, double temperature,
                              int64_t top_k);

}  // namespace ember::examples
