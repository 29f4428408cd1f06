#pragma once
// A BERT encoder (Devlin et al. 2018) with a classification head, for fine-tuning a pretrained
// checkpoint (examples/finetune_text.cpp) and for the tests. The module tree mirrors the
// Hugging Face BertModel's, so that a model.safetensors written for it loads by name.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "examples/checkpoint_mode.h"
#include "nn/nn.h"

namespace ember::examples {

// The defaults are sentence-transformers' all-MiniLM-L6-v2.
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden = 384;
  int64_t num_layers = 6;
  int64_t num_heads = 12;
  int64_t intermediate = 1536;
  int64_t max_positions = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  double dropout = 0.1;  // after the embeddings and every residual branch's output projection
  double attention_dropout = 0.1;  // on the attention probabilities (attention_probs_dropout_prob)
};

// Note [A BERT encoder]
// ids, token types int64 [N, T], attention mask [N, T] (1: a token, 0: padding) -> [N, T, hidden]:
//   h = LayerNorm(word[ids] + position[0..T-1] + token_type[types])       BertEmbeddings
//   per layer (post-LayerNorm, as the original BERT):
//     a = LayerNorm(h + dropout(dense(attention(h, mask))))             attention.{self, output}
//     h = LayerNorm(a + dropout(output.dense(gelu(intermediate.dense(a)))))
// Each padded key is masked out of every query's softmax, so a sequence's outputs do not depend
// on how much padding its batch added. Pooling and classification are BertClassifier's. In
// training the attention probabilities are dropped with attention_dropout (scaled_dot_product_
// attention's dropout_p) and each residual branch's output with dropout. The layers that take
// a mask are MultiInputModules (Note [Modules with several inputs]), called through the call
// path, so hooks see the masks and utils::checkpoint_modules can checkpoint a BertLayer.
// The registered names are the checkpoint's (embeddings.word_embeddings.weight,
// encoder.layer.0.attention.self.query.weight, encoder.layer.0.output.LayerNorm.bias, ...), hence
// "LayerNorm" and "self" as child names.

struct BertEmbeddings : nn::MultiInputModule<BertEmbeddings> {
  explicit BertEmbeddings(const BertConfig& config);
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids);

  nn::Embedding word_embeddings, position_embeddings, token_type_embeddings;
  nn::LayerNorm layer_norm;
  nn::Dropout dropout;
};

// The per-head scaled dot-product attention of the query, key and value projections.
struct BertSelfAttention : nn::MultiInputModule<BertSelfAttention> {
  explicit BertSelfAttention(const BertConfig& config);
  // h [N, T, hidden], key_mask uint8 [N, 1, 1, T] (1: may be attended to) -> [N, T, hidden]
  Tensor forward(const Tensor& h, const Tensor& key_mask);

  const int64_t num_heads;
  const double attention_dropout;
  nn::Linear query, key, value;
};

// LayerNorm(residual + dropout(dense(x))): the end of both residual branches (Hugging Face's
// BertSelfOutput and BertOutput).
struct BertResidualOutput : nn::MultiInputModule<BertResidualOutput> {
  BertResidualOutput(int64_t in, const BertConfig& config);
  Tensor forward(const Tensor& x, const Tensor& residual);

  nn::Linear dense;
  nn::Dropout dropout;
  nn::LayerNorm layer_norm;
};

struct BertAttention : nn::MultiInputModule<BertAttention> {
  explicit BertAttention(const BertConfig& config);
  Tensor forward(const Tensor& h, const Tensor& key_mask);

  BertSelfAttention self_attention;
  BertResidualOutput output;
};

// gelu(dense(x)), the feed-forward's widening half.
struct BertIntermediate : nn::Module {
  explicit BertIntermediate(const BertConfig& config);
  Tensor forward(const Tensor& x) override;

  nn::Linear dense;
};

struct BertLayer : nn::MultiInputModule<BertLayer> {
  explicit BertLayer(const BertConfig& config);
  Tensor forward(const Tensor& h, const Tensor& key_mask);

  BertAttention attention;
  BertIntermediate intermediate;
  BertResidualOutput output;
};

struct BertEncoder : nn::MultiInputModule<BertEncoder> {
  explicit BertEncoder(const BertConfig& config);
  // Runs the layers in order, each through its call (so checkpoint_bert_layers can switch them).
  Tensor forward(const Tensor& h, const Tensor& key_mask);

  nn::ModuleList layer;
};

struct BertModel : nn::MultiInputModule<BertModel> {
  explicit BertModel(const BertConfig& config);
  // ids, token_type_ids (undefined: all 0) and attention_mask int64 [N, T] -> [N, T, hidden]
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids, const Tensor& attention_mask);
  // The layers' mask, uint8 [N, 1, 1, T] (1: a key to attend to), of attention_mask [N, T].
  static Tensor key_mask(const Tensor& attention_mask);

  const BertConfig config;
  BertEmbeddings embeddings;
  BertEncoder encoder;
};

// Note [Classifying a sentence with BERT]
// The sentence embedding is the mean of the encoder's outputs over the real tokens (the
// attention mask's 1s), sentence-transformers' pooling for all-MiniLM-L6-v2; the checkpoint's
// pooler (a tanh layer on the [CLS] token, trained for next-sentence prediction) goes unused.
// classifier = Linear(hidden, classes) after a dropout maps it to scores. The input is one int64
// tensor [N, 2, T], the token ids and the attention mask stacked, so that the model runs as any
// one-input classifier does (a TensorDataset holds it, examples::fit and evaluate call
// model(x)); every token type is 0, one sentence per example. The padding is a mask's trailing
// 0s, and the batch is first cut to its longest text: the positions past it are padding on every
// row, masked out of attention and pooling, so cutting them changes nothing but the work (Note
// [Batches of similar length] in examples/length_grouped_sampler.h).
struct BertClassifier : nn::Module {
  BertClassifier(const BertConfig& config, int64_t classes);
  Tensor forward(const Tensor& ids_and_mask) override;  // [N, 2, T] -> scores [N, classes]
  // The pooled sentence embeddings [N, hidden] of ids_and_mask [N, 2, T].
  Tensor embed(const Tensor& ids_and_mask);
  // The token ids and the attention mask of ids_and_mask [N, 2, T], both [N, T'], cut to the
  // batch's longest text.
  static std::pair<Tensor, Tensor> split_batch(const Tensor& ids_and_mask);
  // The scores [N, classes] of the encoder's output h [N, T', hidden].
  Tensor classify(const Tensor& h, const Tensor& attention_mask);

  BertModel bert;
  nn::Dropout dropout;
  nn::Linear classifier;
};

// The mean over the positions where attention_mask (int64 [N, T]) is 1 of h [N, T, hidden].
Tensor mean_pool(const Tensor& h, const Tensor& attention_mask);

// Switches every layer of the encoder but the last to activation checkpointing (Note
// [Checkpointing BERT's layers] in bert.cpp); returns how many. utils::uncheckpoint_modules undoes it.
int checkpoint_bert_layers(BertModel& model);

// The classifier as examples::checkpointed_forward runs it (examples/checkpoint_mode.h): the
// embeddings as the stem, the encoder's layers as the blocks, and pooling and the classifier as
// the head. The layers run as a chain whose links read the key mask of the batch the stem saw
// last (Note [Chains of layers] in utils/layer_chain.h), so --checkpoint budget=MB plans them.
StackedModel stacked(BertClassifier& model);

// Loads a Hugging Face BertModel checkpoint (model.safetensors) into `model`. Every parameter of
// the model must be in the file, with its shape; of the file's other entries only the pooler's
// weights and the position-id buffer (embeddings.position_ids) may go unused. Anything else is an
// ember::Error naming the file and the keys.
void load_pretrained_bert(BertModel& model, const std::string& safetensors_path);

}  // namespace ember::examples
