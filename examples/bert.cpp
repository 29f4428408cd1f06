#include "examples/bert.h"

#include <algorithm>
#include <sstream>

#include "serialize/safetensors.h"
#include "utils/checkpoint_sequential.h"

namespace ember::examples {

namespace {

std::string shape_of(const Tensor& t) { return t.defined() ? shape_str(t.shape()) : "undefined"; }

// Linear weights N(0, 0.02) and zero biases, BERT's initialisation (initializer_range); what a
// randomly initialised model (the tests') and the new classification head start from.
void init_linear(nn::Linear& linear) {
  nn::init::normal_(linear.weight, 0.0, 0.02);
  nn::init::zeros_(linear.bias);
}

}  // namespace

BertEmbeddings::BertEmbeddings(const BertConfig& c)
    : word_embeddings(c.vocab_size, c.hidden), position_embeddings(c.max_positions, c.hidden),
      token_type_embeddings(c.type_vocab_size, c.hidden), layer_norm(c.hidden, c.layer_norm_eps), dropout(c.dropout) {
  register_module("word_embeddings", word_embeddings);
  register_module("position_embeddings", position_embeddings);
  register_module("token_type_embeddings", token_type_embeddings);
  register_module("LayerNorm", layer_norm);
  register_module("dropout", dropout);
  for (nn::Embedding* table : {&word_embeddings, &position_embeddings, &token_type_embeddings})
    nn::init::normal_(table->weight, 0.0, 0.02);
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& token_type_ids) {
  const int64_t seq = ids.size(1);
  EMBER_CHECK(seq <= position_embeddings.num_embeddings, "[BertEmbeddings] a sequence of ", seq,
              " tokens is longer than the position table (", position_embeddings.num_embeddings, ")");
  Tensor positions = arange(0, static_cast<double>(seq), 1.0, TensorOptions(kInt64).with_device(ids.device()));
  return dropout(layer_norm(word_embeddings(ids) + position_embeddings(positions) +
                            token_type_embeddings(token_type_ids)));
}

BertSelfAttention::BertSelfAttention(const BertConfig& c)
    : num_heads(c.num_heads), attention_dropout(c.attention_dropout), query(c.hidden, c.hidden),
      key(c.hidden, c.hidden), value(c.hidden, c.hidden) {
  EMBER_CHECK(c.num_heads > 0 && c.hidden % c.num_heads == 0, "[BertSelfAttention] hidden ", c.hidden,
              " must be divisible by num_heads ", c.num_heads);
  register_module("query", query);
  register_module("key", key);
  register_module("value", value);
  for (nn::Linear* linear : {&query, &key, &value}) init_linear(*linear);
}

Tensor BertSelfAttention::forward(const Tensor& h, const Tensor& key_mask) {
  const int64_t batch = h.size(0), seq = h.size(1), hidden = h.size(2), head_dim = hidden / num_heads;
  // [N, T, hidden] -> [N, heads, T, head_dim]: head i is columns [i * head_dim, (i + 1) * head_dim).
  const auto heads = [&](const Tensor& x) { return x.reshape({batch, seq, num_heads, head_dim}).transpose(1, 2); };
  Tensor context = scaled_dot_product_attention(heads(query(h)), heads(key(h)), heads(value(h)), key_mask,
                                                is_training() ? attention_dropout : 0.0);
  return context.transpose(1, 2).reshape({batch, seq, hidden});
}

BertResidualOutput::BertResidualOutput(int64_t in, const BertConfig& c)
    : dense(in, c.hidden), dropout(c.dropout), layer_norm(c.hidden, c.layer_norm_eps) {
  register_module("dense", dense);
  register_module("dropout", dropout);
  register_module("LayerNorm", layer_norm);
  init_linear(dense);
}

Tensor BertResidualOutput::forward(const Tensor& x, const Tensor& residual) {
  return layer_norm(dropout(dense(x)) + residual);
}

BertAttention::BertAttention(const BertConfig& c) : self_attention(c), output(c.hidden, c) {
  register_module("self", self_attention);
  register_module("output", output);
}

Tensor BertAttention::forward(const Tensor& h, const Tensor& key_mask) {
  return output(self_attention(h, key_mask), h);
}

BertIntermediate::BertIntermediate(const BertConfig& c) : dense(c.hidden, c.intermediate) {
  register_module("dense", dense);
  init_linear(dense);
}

Tensor BertIntermediate::forward(const Tensor& x) { return gelu(dense(x)); }

BertLayer::BertLayer(const BertConfig& c) : attention(c), intermediate(c), output(c.intermediate, c) {
  register_module("attention", attention);
  register_module("intermediate", intermediate);
  register_module("output", output);
}

Tensor BertLayer::forward(const Tensor& h, const Tensor& key_mask) {
  Tensor a = attention(h, key_mask);
  return output(intermediate(a), a);
}

BertEncoder::BertEncoder(const BertConfig& c) {
  EMBER_CHECK(c.num_layers >= 1, "[BertEncoder] num_layers must be at least 1, got ", c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) layer.add<BertLayer>(c);
  register_module("layer", layer);
}

Tensor BertEncoder::forward(const Tensor& h, const Tensor& key_mask) {
  Tensor x = h;
  for (size_t i = 0; i < layer.size(); ++i) x = layer.at<BertLayer>(i)(x, key_mask);
  return x;
}

// Note [Checkpointing BERT's layers]
// A layer takes two tensors, the hidden states and the key mask; as a MultiInputModule it is
// checkpointed with both (Note [Modules with several inputs]): the mask needs no gradient, and
// the recompute in backward sees the same one. The last layer stays plain (Note [The last block
// stays plain] in examples/checkpoint_mode.cpp). Dropout — the residual branches' and the
// attention probabilities' — draws the same masks in the recompute
// (CheckpointOptions::preserve_rng_state), so the losses and gradients are bitwise a plain step's.
int checkpoint_bert_layers(BertModel& model) {
  const nn::Module* last = &model.encoder.layer[model.encoder.layer.size() - 1];
  return utils::checkpoint_modules(
      model.encoder, [last](nn::Module& m) { return dynamic_cast<BertLayer*>(&m) != nullptr && &m != last; });
}

BertModel::BertModel(const BertConfig& c) : config(c), embeddings(c), encoder(c) {
  register_module("embeddings", embeddings);
  register_module("encoder", encoder);
}

Tensor BertModel::forward(const Tensor& ids, const Tensor& token_type_ids, const Tensor& attention_mask) {
  EMBER_CHECK(ids.defined() && ids.dim() == 2 && ids.dtype() == kInt64, "[BertModel] expected int64 token ids [N, T], got ",
              ids.defined() ? std::string(dtype_name(ids.dtype())) + " " : "", shape_of(ids));
  EMBER_CHECK(attention_mask.defined() && attention_mask.shape() == ids.shape(), "[BertModel] the attention mask ",
              shape_of(attention_mask), " must have the ids' shape ", shape_of(ids));
  EMBER_CHECK(!token_type_ids.defined() || token_type_ids.shape() == ids.shape(), "[BertModel] the token types ",
              shape_of(token_type_ids), " must have the ids' shape ", shape_of(ids));
  const Tensor types = token_type_ids.defined() ? token_type_ids : zeros_like(ids);
  return encoder(embeddings(ids, types), key_mask(attention_mask));
}

Tensor BertModel::key_mask(const Tensor& attention_mask) {
  // [N, T] -> uint8 [N, 1, 1, T]: broadcast over the heads and the queries.
  return (attention_mask != 0).to(kUInt8).unsqueeze(1).unsqueeze(1);
}

Tensor mean_pool(const Tensor& h, const Tensor& attention_mask) {
  const Tensor weights = attention_mask.to(h.dtype()).unsqueeze(-1);  // [N, T, 1]
  return (h * weights).sum({1}) / weights.sum({1});
}

BertClassifier::BertClassifier(const BertConfig& c, int64_t classes)
    : bert(c), dropout(c.dropout), classifier(c.hidden, classes) {
  register_module("bert", bert);
  register_module("dropout", dropout);
  register_module("classifier", classifier);
  init_linear(classifier);
}

std::pair<Tensor, Tensor> BertClassifier::split_batch(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() == 3 && x.size(1) == 2, "[BertClassifier] expected token ids and attention mask "
              "stacked as [N, 2, T], got shape ", shape_of(x));
  // Cut to the batch's longest text: the rest is padding on every row.
  const auto longest = static_cast<int64_t>(max(x.select(1, 1).sum({1})).item());
  EMBER_CHECK(longest > 0, "[BertClassifier] every attention mask of the batch is all 0");
  return {x.select(1, 0).narrow(1, 0, longest), x.select(1, 1).narrow(1, 0, longest)};
}

Tensor BertClassifier::embed(const Tensor& x) {
  const auto [ids, mask] = split_batch(x);
  return mean_pool(bert(ids, Tensor(), mask), mask);
}

Tensor BertClassifier::classify(const Tensor& h, const Tensor& attention_mask) {
  return classifier(dropout(mean_pool(h, attention_mask)));
}

Tensor BertClassifier::forward(const Tensor& x) {
  const auto [ids, mask] = split_batch(x);
  return classify(bert(ids, Tensor(), mask), mask);
}

StackedModel stacked(BertClassifier& model) {
  // What the stem saw of the batch, for the layers and the head (and a checkpoint's recompute,
  // which runs before the next batch's stem).
  struct Masks {
    Tensor attention, keys;
  };
  auto masks = std::make_shared<Masks>();
  nn::ModuleList& layers = model.bert.encoder.layer;
  std::vector<utils::LayerChain::Link> links;
  for (size_t i = 0; i < layers.size(); ++i) {
    BertLayer& layer = layers.at<BertLayer>(i);
    links.push_back({"encoder.layer." + std::to_string(i), [&layer, masks](const Tensor& h) { return layer(h, masks->keys); }});
  }
  return {model, layers,
          [&model, masks](const Tensor& x) {
            const auto [ids, mask] = BertClassifier::split_batch(x);
            *masks = {mask, BertModel::key_mask(mask)};
            return model.bert.embeddings(ids, zeros_like(ids));
          },
          [&model, masks](const Tensor& h) { return model.classify(h, masks->attention); },
          utils::LayerChain(std::move(links), layers.parameters())};
}

void load_pretrained_bert(BertModel& model, const std::string& path) {
  const nn::LoadResult result = model.load_state_dict(nn::load_safetensors(path), /*strict=*/false);
  // Entries of a BertModel checkpoint that this model has no use for (Note [Classifying a
  // sentence with BERT]): positions are made by arange.
  const auto unused = [](const std::string& key) {
    return key == "embeddings.position_ids" || key.starts_with("pooler.");
  };
  std::vector<std::string> unexpected;
  std::copy_if(result.unexpected_keys.begin(), result.unexpected_keys.end(), std::back_inserter(unexpected),
               [&](const std::string& key) { return !unused(key); });
  if (result.missing_keys.empty() && unexpected.empty()) return;
  std::ostringstream keys;
  for (const std::string& key : result.missing_keys) keys << "\n  missing (in the model, not in the file): " << key;
  for (const std::string& key : unexpected) keys << "\n  unexpected (in the file, not in the model): " << key;
  EMBER_FAIL("[load_pretrained_bert] '", path, "' does not map onto a BERT of ", model.config.num_layers, " layers, hidden ",
             model.config.hidden, " (", result.missing_keys.size(), " missing, ", unexpected.size(),
             " unexpected keys):", keys.str());
}

}  // namespace ember::examples
