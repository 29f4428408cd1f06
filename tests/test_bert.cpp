// The fine-tuning example's parts (examples/finetune_text.cpp): the BERT classifier on a tiny
// random-weight model — Hugging Face's parameter names, loading a checkpoint and refusing one that
// does not map, the padding mask, and checkpointed layers that must not change a single bit of
// the gradients — and the split of the fortunes by collection.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "core/generator.h"
#include "examples/bert.h"
#include "examples/fortune_collections.h"
#include "serialize/safetensors.h"
#include "temp_dir.h"
#include "test_helpers.h"
#include "utils/checkpoint.h"

using namespace ember;
using testutil::expect_error;
using testutil::values;

namespace {

examples::BertConfig tiny_config(double dropout = 0.0) {
  examples::BertConfig c;
  c.vocab_size = 20;
  c.hidden = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.intermediate = 16;
  c.max_positions = 16;
  c.dropout = c.attention_dropout = dropout;
  return c;
}

// Two texts of 5 and 3 tokens, padded to 5: each text's ids, then its mask ([2, 2, 5]).
Tensor batch_of_two() {
  return from_vector<int64_t>({2, 7, 9, 4, 3, /**/ 1, 1, 1, 1, 1,  //
                               2, 11, 3, 0, 0, /**/ 1, 1, 1, 0, 0},
                              {2, 2, 5}, TensorOptions(kInt64));
}

// The names of a Hugging Face BertModel checkpoint of `layers` layers, as model.safetensors
// lists them.
std::set<std::string> hugging_face_names(int64_t layers) {
  std::set<std::string> names;
  for (const char* table : {"word_embeddings", "position_embeddings", "token_type_embeddings"})
    names.insert(std::string("embeddings.") + table + ".weight");
  names.insert("embeddings.LayerNorm.weight");
  names.insert("embeddings.LayerNorm.bias");
  for (int64_t i = 0; i < layers; ++i) {
    const std::string layer = "encoder.layer." + std::to_string(i) + ".";
    for (const char* part : {"attention.self.query", "attention.self.key", "attention.self.value",
                             "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                             "output.dense", "output.LayerNorm"})
      for (const char* tensor : {".weight", ".bias"}) names.insert(layer + part + tensor);
  }
  return names;
}

}  // namespace

TEST(Bert, ParametersCarryHuggingFacesNames) {
  examples::BertModel model(tiny_config());
  std::set<std::string> names;
  for (const auto& [name, tensor] : model.state_dict()) names.insert(name);
  EXPECT_EQ(names, hugging_face_names(2));
}

TEST(Bert, LoadsACheckpointWithHuggingFacesNamesAndItsUnusedExtras) {
  ember::testing::TempDir tmp;
  manual_seed(1);
  examples::BertModel source(tiny_config());
  nn::StateDict file = source.state_dict();
  // What a BertModel checkpoint holds besides: the pooler and the position-id buffer.
  file["pooler.dense.weight"] = randn({8, 8});
  file["pooler.dense.bias"] = zeros({8});
  file["embeddings.position_ids"] = arange(0, 16, 1, TensorOptions(kInt64)).unsqueeze(0);
  nn::save_safetensors(file, tmp.path("model.safetensors"));

  manual_seed(2);
  examples::BertClassifier model(tiny_config(), 3);
  examples::load_pretrained_bert(model.bert, tmp.path("model.safetensors"));
  for (const auto& [name, tensor] : source.state_dict())
    EXPECT_EQ(values(model.bert.state_dict().at(name)), values(tensor)) << name;
}

TEST(Bert, RefusesACheckpointThatDoesNotMap) {
  ember::testing::TempDir tmp;
  examples::BertModel model(tiny_config());
  nn::StateDict missing = model.state_dict();
  missing.erase("encoder.layer.1.output.LayerNorm.bias");
  nn::save_safetensors(missing, tmp.path("missing.safetensors"));
  expect_error([&] { examples::load_pretrained_bert(model, tmp.path("missing.safetensors")); },
               "missing (in the model, not in the file): encoder.layer.1.output.LayerNorm.bias");

  nn::StateDict deeper = model.state_dict();
  deeper["encoder.layer.2.output.dense.bias"] = zeros({8});
  nn::save_safetensors(deeper, tmp.path("deeper.safetensors"));
  expect_error([&] { examples::load_pretrained_bert(model, tmp.path("deeper.safetensors")); },
               "unexpected (in the file, not in the model): encoder.layer.2.output.dense.bias");

  nn::StateDict wider = model.state_dict();
  wider["encoder.layer.0.intermediate.dense.bias"] = zeros({32});
  nn::save_safetensors(wider, tmp.path("wider.safetensors"));
  expect_error([&] { examples::load_pretrained_bert(model, tmp.path("wider.safetensors")); },
               "encoder.layer.0.intermediate.dense.bias");
}

TEST(Bert, PaddingChangesNoSentenceEmbedding) {
  manual_seed(3);
  examples::BertClassifier model(tiny_config(), 3);
  model.eval();
  const Tensor x = batch_of_two();
  // The second text alone, without padding, and with four more padding tokens of another id.
  const Tensor alone = x.narrow(0, 1, 1).narrow(2, 0, 3);
  const Tensor padded = cat({x.narrow(0, 1, 1), from_vector<int64_t>({5, 5, 5, 5, 0, 0, 0, 0}, {1, 2, 4},
                                                                        TensorOptions(kInt64))},
                            2);
  const Tensor expected = model.embed(alone);
  testutil::expect_near(model.embed(x).narrow(0, 1, 1), values(expected));
  testutil::expect_near(model.embed(padded), values(expected));
}

TEST(Bert, RefusesInputsOfTheWrongShape) {
  examples::BertClassifier model(tiny_config(), 3);
  expect_error([&] { model(zeros({2, 5}, TensorOptions(kInt64))); }, "[N, 2, T], got shape [2, 5]");
  expect_error([&] { model.bert.forward(zeros({2, 5}, TensorOptions(kInt64)), Tensor(), zeros({2, 4}, TensorOptions(kInt64))); },
               "the attention mask [2, 4] must have the ids' shape [2, 5]");
  expect_error([&] { model(ones({1, 2, 17}, TensorOptions(kInt64))); }, "longer than the position table (16)");
}

TEST(Bert, CheckpointedLayersGiveBitwiseThePlainGradients) {
  // Dropout on, so the recompute must replay the generator to draw the same masks.
  manual_seed(4);
  examples::BertClassifier plain(tiny_config(0.1), 3);
  manual_seed(4);
  examples::BertClassifier checkpointed(tiny_config(0.1), 3);
  EXPECT_EQ(examples::checkpoint_bert_layers(checkpointed.bert), 1);  // layer 0 of 2
  const Tensor x = batch_of_two(), y = from_vector<int64_t>({2, 0}, {2}, TensorOptions(kInt64));
  const auto step = [&](examples::BertClassifier& model) {
    manual_seed(5);
    Tensor loss = cross_entropy(model(x), y);
    loss.backward();
    return loss.item();
  };
  const double plain_loss = step(plain);
  const int64_t forwards = utils::checkpoint_stats().forwards;
  const double checkpointed_loss = step(checkpointed);
  EXPECT_EQ(utils::checkpoint_stats().forwards - forwards, 1);  // layer 0; the last layer stays plain
  EXPECT_EQ(checkpointed_loss, plain_loss);
  const auto plain_params = plain.named_parameters(), checkpointed_params = checkpointed.named_parameters();
  ASSERT_EQ(plain_params.size(), checkpointed_params.size());
  for (size_t i = 0; i < plain_params.size(); ++i) {
    ASSERT_TRUE(plain_params[i].second.grad().defined()) << plain_params[i].first;
    EXPECT_EQ(values(checkpointed_params[i].second.grad()), values(plain_params[i].second.grad()))
        << plain_params[i].first;
  }
}

TEST(FortuneCollections, SplitsByTheHashOfTheTextAndDropsAmbiguousTexts) {
  ember::testing::TempDir tmp;
  // FNV-1a modulo 10: "a" 6 (train), "m" and "w" 0 (test), "l" 1 (validation); "shared" is in both
  // collections and is dropped, "a" twice in one is kept once, a blank entry is no fortune.
  std::ofstream(tmp.path("one")) << "a\n%\nm\n%\nshared\n%\na\n";
  std::ofstream(tmp.path("two")) << "l\n%\nshared\n%\n  \n%\nw";
  const examples::FortuneSplits s = examples::split_fortune_collections(tmp.dir().string(), {"one", "two"});
  EXPECT_EQ(s.collections, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(s.train.texts, (std::vector<std::string>{"a"}));
  EXPECT_EQ(s.train.labels, (std::vector<int64_t>{0}));
  EXPECT_EQ(s.validation.texts, (std::vector<std::string>{"l"}));
  EXPECT_EQ(s.validation.labels, (std::vector<int64_t>{1}));
  EXPECT_EQ(s.test.texts, (std::vector<std::string>{"m", "w"}));
  EXPECT_EQ(s.test.labels, (std::vector<int64_t>{0, 1}));
  expect_error([&] { examples::split_fortune_collections(tmp.dir().string(), {"one", "three"}); }, "three");
  expect_error([&] { examples::split_fortune_collections(tmp.dir().string(), {"one"}); }, "at least two");
}
