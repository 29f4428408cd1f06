#include "nn/transformer_encoder.h"


namespace ember::nn {

namespace {
const TransformerEncoderLayerOptions& checked(const TransformerEncoderLayerOptions& o) {
  check_enum(o.activation, FeedForwardActivation::GELU, "TransformerEncoderLayer", "activation");
  EMBER_CHECK(o.dim_feedforward > 0, "[TransformerEncoderLayer] dim_feedforward must be positive, got ",
              o.dim_feedforward);
  return o;
}
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerOptions& o)
    : options(checked(o)),
      self_attn(o.d_model, o.nhead, o.dropout, o.bias, std::nullopt, std::nullopt, o.batch_first),
      linear1(o.d_model, o.dim_feedforward, o.bias),
      dropout(o.dropout),
      linear2(o.dim_feedforward, o.d_model, o.bias),
      norm1(o.d_model, o.layer_norm_eps, true, o.bias),
      norm2(o.d_model, o.layer_norm_eps, true, o.bias),
      dropout1(o.dropout),
      dropout2(o.dropout) {
  register_module("self_attn", self_attn);
  register_module("linear1", linear1);
  register_module("dropout", dropout);
  register_module("linear2", linear2);
  register_module("norm1", norm1);
  register_module("norm2", norm2);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 double dropout, FeedForwardActivation activation,
                                                 double layer_norm_eps, bool batch_first, bool norm_first, bool bias)
    : TransformerEncoderLayer(TransformerEncoderLayerOptions{d_model, nhead, dim_feedforward, dropout, activation,
                                                             layer_norm_eps, batch_first, norm_first, bias}) {}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return forward(src, Tensor()); }

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  if (options.norm_first) {
    x = x + self_attention_block(norm1(x), src_mask, src_key_padding_mask, is_causal);
    return x + feed_forward_block(norm2(x));
  }
  x = norm1(x + self_attention_block(x, src_mask, src_key_padding_mask, is_causal));
  return norm2(x + feed_forward_block(x));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& src_mask,
                                                     const Tensor& src_key_padding_mask, bool is_causal) {
  return dropout1(self_attn(x, x, x, src_key_padding_mask, false, src_mask, true, is_causal).first);
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  const Tensor h = linear1(x);
  return dropout2(linear2(dropout(options.activation == FeedForwardActivation::GELU ? gelu(h) : relu(h))));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayerOptions& layer, int64_t n, bool final_norm)
    : num_layers(n) {
  EMBER_CHECK(n > 0, "[TransformerEncoder] num_layers must be positive, got ", n);
  for (int64_t i = 0; i < n; ++i) layers.add<TransformerEncoderLayer>(layer);
  const StateDict first = layers[0].state_dict();
  for (size_t i = 1; i < layers.size(); ++i) layers[i].load_state_dict(first);
  register_module("layers", layers);
  if (final_norm) {
    norm = std::make_unique<LayerNorm>(layer.d_model, layer.layer_norm_eps, true, layer.bias);
    register_module("norm", *norm);
  }
}

Tensor TransformerEncoder::forward(const Tensor& src) { return forward(src, Tensor()); }

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                   bool is_causal) {
  Tensor x = src;
  for (size_t i = 0; i < layers.size(); ++i)
    x = layers.at<TransformerEncoderLayer>(i)(x, mask, src_key_padding_mask, is_causal);
  return norm ? (*norm)(x) : x;
}

}  // namespace ember::nn
