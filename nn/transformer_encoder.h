#pragma once
#include <memory>

#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/layer_norm.h"
#include "nn/module_list.h"

namespace ember::nn {

// The feed-forward sublayer's activation (PyTorch's activation="relu" or "gelu", the exact form).
enum class FeedForwardActivation { ReLU, GELU };

struct TransformerEncoderLayerOptions {
  int64_t d_model = 0, nhead = 0, dim_feedforward = 2048;
  double dropout = 0.1;
  FeedForwardActivation activation = FeedForwardActivation::ReLU;
  double layer_norm_eps = 1e-5;
  bool batch_first = false, norm_first = false, bias = true;
};

// Note [Transformer encoder layer]
// torch.nn.TransformerEncoderLayer: self-attention and a feed-forward network, each in a residual
// connection with a LayerNorm, with PyTorch's submodule names (so its state dict loads unchanged):
//   sa(x) = dropout1(self_attn(x, x, x, masks, need_weights = false))
//   ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))
//   norm_first (pre-norm):   x = x + sa(norm1(x));  x = x + ff(norm2(x))
//   otherwise (post-norm):   x = norm1(x + sa(x));  x = norm2(x + ff(x))   (BERT's, the original)
// src [S, N, d_model] ([N, S, d_model] with batch_first, [S, d_model] unbatched); src_mask and
// src_key_padding_mask are MultiheadAttention's attn_mask and key_padding_mask, in its convention
// (uint8 nonzero = may not attend; floating: added), and is_causal its hint (it needs src_mask).
// bias = false leaves out every Linear's and LayerNorm's bias. Both layers are MultiInputModules
// (Note [Modules with several inputs]): layer(src, src_mask, src_key_padding_mask) runs the hooks,
// and utils::checkpoint_modules<TransformerEncoderLayer> checkpoints each layer with its masks.
class TransformerEncoderLayer : public MultiInputModule<TransformerEncoderLayer> {
 public:
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& options);
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048, double dropout = 0.1,
                          FeedForwardActivation activation = FeedForwardActivation::ReLU, double layer_norm_eps = 1e-5,
                          bool batch_first = false, bool norm_first = false, bool bias = true);
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);

  const TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn;
  Linear linear1;
  Dropout dropout;
  Linear linear2;
  LayerNorm norm1, norm2;
  Dropout dropout1, dropout2;

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                              bool is_causal);
  Tensor feed_forward_block(const Tensor& x);
};

// torch.nn.TransformerEncoder: num_layers TransformerEncoderLayers built from one configuration,
// named layers.0, layers.1, ..., run in turn with the same masks, then the optional final norm
// (LayerNorm(d_model, layer_norm_eps, bias), named norm; pre-norm stacks usually want it). As
// PyTorch's, which deep-copies one layer, every layer starts with the same parameters.
class TransformerEncoder : public MultiInputModule<TransformerEncoder> {
 public:
  TransformerEncoder(const TransformerEncoderLayerOptions& layer, int64_t num_layers, bool final_norm = false);
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);

  const int64_t num_layers;
  ModuleList layers;
  std::unique_ptr<LayerNorm> norm;  // null without final_norm
};

}  // namespace ember::nn
