#pragma once
#include <optional>
#include <utility>

#include "nn/linear.h"
#include "nn/multi_input_module.h"

namespace ember::nn {

// embed_dim / num_heads, with the checks both attention layers make; `layer` names the caller.
int64_t attention_head_dim(int64_t embed_dim, int64_t num_heads, const char* layer);

// Note [PyTorch's multi-head attention]
// torch.nn.MultiheadAttention with its parameters, shapes, masks and results, so that its state
// dict loads unchanged:
//   in_proj_weight [3E, E]            the query, key and value projections stacked (in that order),
//                                     when kdim == vdim == embed_dim; otherwise
//   q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight [E, vdim]
//                                     (kdim and vdim are given together: one alone is refused,
//                                     where PyTorch takes the other as embed_dim)
//   in_proj_bias [3E]                 with bias
//   out_proj (Linear(E, E, bias))     mixes the heads
// initialised as PyTorch's: xavier_uniform_ on in_proj_weight as one [3E, E] matrix (or on each
// of the three), the biases zero, out_proj's weight as a Linear's.
//
// forward(query, key, value, ...) takes query [L, N, E], key [S, N, kdim] and value [S, N, vdim]
// ([N, L, E] ... with batch_first; [L, E] ... without a batch) and returns (output [L, N, E],
// weights). Head h sees columns [h * head_dim, (h + 1) * head_dim) of each projection, and
// scaled_dot_product_attention runs all heads at once. The masks keep PyTorch's module convention,
// the opposite of scaled_dot_product_attention's: a uint8 (ember's bool) mask is nonzero where a
// key must NOT be attended to; a floating one (the query's dtype) is added to the scores.
//   key_padding_mask [N, S] ([S] unbatched): padding keys of each sequence
//   attn_mask [L, S] or [N * num_heads, L, S] ([num_heads, L, S] unbatched): per query and key
// Both may be given, of either kind; they are merged into one mask (a uint8 one when both are).
// is_causal is PyTorch's hint that attn_mask is the causal mask: it needs attn_mask, and without a
// key_padding_mask the causal pattern is then applied inside the softmax instead of reading the
// mask. In training, dropout drops attention weights. With need_weights the weights (after
// dropout, as PyTorch's) are returned, [N, L, S] averaged over the heads or [N, num_heads, L, S]
// without average_attn_weights (no N unbatched); else an undefined tensor, and the attention runs
// through scaled_dot_product_attention without keeping them.
// A query that may attend to no key gives zeros (Note [Rows that attend to nothing]) with or
// without need_weights; PyTorch gives that only without need_weights and NaN with.
class MultiheadAttention : public MultiInputModule<MultiheadAttention> {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     std::optional<int64_t> kdim = std::nullopt, std::optional<int64_t> vdim = std::nullopt,
                     bool batch_first = false);
  // Self-attention without masks: the output of forward(x, x, x) alone.
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                                    const Tensor& attn_mask = Tensor(), bool average_attn_weights = true,
                                    bool is_causal = false);

  const int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  const double dropout;
  const bool batch_first;
  Tensor in_proj_weight;                               // when kdim == vdim == embed_dim, else undefined
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // otherwise
  Tensor in_proj_bias;                                 // undefined without bias
  Linear out_proj;

 private:
  // key_padding_mask and attn_mask as one mask for scaled_dot_product_attention, broadcasting to
  // [N, num_heads, L, S] (undefined when neither is given).
  Tensor merged_mask(const Tensor& key_padding_mask, const Tensor& attn_mask, const Tensor& q, int64_t S,
                     bool batched) const;
};

}  // namespace ember::nn
