// The character-level GPT example's parts: reading the fortunes, the vocabulary and the training
// windows, the GPT model (shapes, errors, parameter groups, sampling) and activation
// checkpointing of its blocks, which must not change a single bit of the gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/generator.h"
#include "examples/char_text.h"
#include "examples/checkpoint_mode.h"
#include "examples/gpt.h"
#include "examples/run_export.h"
#include "serialize/safetensors.h"
#include "temp_dir.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::values;

namespace {

const std::string kFortunes = std::string(EMBER_FIXTURES_DIR) + "/fortunes";

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

examples::GPTConfig tiny_config(int64_t vocab = 11) {
  examples::GPTConfig c;
  c.vocab_size = vocab;
  c.context = 8;
  c.embed_dim = 8;
  c.num_heads = 2;
  c.num_layers = 3;
  return c;
}

// The GPT as checkpointed_forward sees it: a stem, the blocks and a head.
examples::StackedModel parts_of(examples::GPT& model) {
  return {model, model.blocks, [&model](const Tensor& t) { return model.stem_forward(t); },
          [&model](const Tensor& h) { return model.head_forward(h); }};
}

Tensor ids(const std::vector<int64_t>& v, const Shape& shape) {
  return from_vector<int64_t>(v, shape, TensorOptions(kInt64));
}

}  // namespace

TEST(CharText, ReadsThePlainFortuneFilesInNameOrder) {
  // machines, then proverbs; not proverbs.dat (an index), proverbs.u8 or machines-link (links to
  // files already read) or off/rude (a subfolder).
  EXPECT_EQ(examples::read_fortunes(kFortunes),
            file_text(kFortunes + "/machines") + file_text(kFortunes + "/proverbs"));
  expect_error([] { examples::read_fortunes("/no/such/folder"); },
               "[read_fortunes] '/no/such/folder' is not a directory");
}

TEST(CharText, VocabularyEncodesAndDecodes) {
  examples::CharVocab vocab("hello, world");
  EXPECT_EQ(vocab.size(), 9);  // " ,dehlorw"
  Tensor encoded = vocab.encode("world");
  EXPECT_EQ(encoded.dtype(), kInt64);
  EXPECT_EQ(encoded.to_vector<int64_t>(), (std::vector<int64_t>{8, 6, 7, 5, 2}));
  EXPECT_EQ(vocab.decode(encoded.to_vector<int64_t>()), "world");
  expect_error([&] { vocab.encode("hex"); },
               "[CharVocab] byte 120 at offset 2 does not occur in the vocabulary's text");
  expect_error([&] { vocab.decode({9}); }, "[CharVocab] id 9 is out of range for 9 characters");
  expect_error([] { examples::CharVocab(""); }, "[CharVocab] the text is empty");
}

TEST(CharText, WindowsPredictTheNextToken) {
  Tensor text = arange(0, 10, 1, TensorOptions(kInt64));  // 0..9
  auto windows = examples::next_token_windows(text, 4);
  ASSERT_EQ(windows->size(), 2);  // [0..3] and [4..7]; 8 has its next token, but no full window
  data::Example second = windows->get(1);
  EXPECT_EQ(second.data.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(second.target.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 7, 8}));
  expect_error([&] { examples::next_token_windows(text, 10); }, "[next_token_windows] 10 tokens make no window of 10");
  expect_error([&] { examples::next_token_windows(zeros({5}), 2); }, "[next_token_windows] expects int64 ids [n]");
}

TEST(GPT, ShapesNamesAndInitialisation) {
  manual_seed(1);
  examples::GPT model(tiny_config());
  Tensor logits = model(ids({1, 2, 3, 4, 5, 6, 0, 10, 3}, {3, 3}));
  EXPECT_EQ(logits.shape(), (Shape{3, 3, 11}));
  const nn::StateDict state = model.state_dict();
  for (const char* key : {"tok_emb.weight", "pos_emb.weight", "blocks.0.ln1.weight", "blocks.2.attn.qkv.weight",
                          "blocks.2.mlp.2.bias", "ln_f.bias", "lm_head.weight"})
    EXPECT_TRUE(state.count(key)) << key;
  EXPECT_FALSE(state.count("lm_head.bias"));
  EXPECT_FALSE(model.lm_head.weight.is_same(model.tok_emb.weight));  // untied
  // GPT-2's initialisation: 0.02, and less for the projections into the residual stream.
  nn::Linear& out_proj = model.blocks.at<nn::TransformerBlock>(0).attn.out_proj;
  EXPECT_EQ(values(out_proj.bias), std::vector<double>(8, 0.0));
  examples::GPTConfig wide = tiny_config(300);
  wide.embed_dim = 64;
  examples::GPT big(wide);
  EXPECT_NEAR(stddev(big.tok_emb.weight.flatten(), {0}).item(), 0.02, 0.002);
  const Tensor& residual = big.blocks.at<nn::TransformerBlock>(0).attn.out_proj.weight;
  EXPECT_NEAR(stddev(residual.flatten(), {0}).item(), 0.02 / std::sqrt(6.0), 0.002);
}

TEST(GPT, RefusesBadInput) {
  examples::GPT model(tiny_config());
  expect_error([&] { model(ids({1, 11}, {1, 2})); }, "[embedding] id 11 is out of range for a table of 11 embeddings");
  expect_error([&] { model(zeros({1, 9}, TensorOptions(kInt64))); },
               "[GPT] a sequence of 9 tokens is longer than the position table (context 8)");
  expect_error([&] { model(zeros({4}, TensorOptions(kInt64))); },
               "[GPT] expected token ids [batch, seq], got shape [4]");
  examples::GPTConfig odd = tiny_config();
  odd.num_heads = 3;
  expect_error([&] { examples::GPT bad(odd); }, "[CausalSelfAttention] embed_dim 8 must be divisible by num_heads 3");
}

TEST(GPT, WeightDecayOnlyForMatmulWeights) {
  examples::GPT model(tiny_config());
  optim::AdamW opt(examples::gpt_param_groups(model, optim::AdamWOptions(1e-3).weight_decay(0.1)));
  ASSERT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.options(0).weight_decay_, 0.1);
  EXPECT_EQ(opt.options(1).weight_decay_, 0.0);
  // Per block: qkv, out_proj and the MLP's two Linears; and the head.
  EXPECT_EQ(opt.params(0).size(), 3u * 4 + 1);
  for (const Tensor& p : opt.params(0)) EXPECT_EQ(p.dim(), 2);
  size_t embeddings = 0;
  for (const Tensor& p : opt.params(1)) {
    embeddings += p.is_same(model.tok_emb.weight) || p.is_same(model.pos_emb.weight);
    EXPECT_TRUE(p.dim() == 1 || p.is_same(model.tok_emb.weight) || p.is_same(model.pos_emb.weight));
  }
  EXPECT_EQ(embeddings, 2u);
  EXPECT_EQ(opt.params(0).size() + opt.params(1).size(), model.parameters().size());
}

TEST(GPT, SamplingIsSeededAndRespectsTopK) {
  manual_seed(2);
  examples::GPT model(tiny_config());
  manual_seed(5);
  const auto a = examples::generate(model, {1, 2}, 20, 1.0, 0);
  manual_seed(5);
  const auto b = examples::generate(model, {1, 2}, 20, 1.0, 0);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 22u);  // longer than the context: the window slides
  EXPECT_EQ(a[0], 1);
  // top_k = 1 is greedy: always the highest logit.
  const auto greedy = examples::generate(model, {3}, 1, 1.0, 1);
  Tensor logits = model(ids({3}, {1, 1}));
  EXPECT_EQ(greedy[1], argmax(logits.reshape({11}), 0).item<int64_t>());
  EXPECT_TRUE(model.is_training());  // restored
  expect_error([&] { examples::generate(model, {}, 3, 1.0, 0); }, "[generate] the prompt is empty");
  expect_error([&] { examples::generate(model, {1}, 3, 0.0, 0); }, "[generate] temperature must be finite and > 0");
}

// Checkpointing recomputes the blocks' forward exactly (Dropout masks replayed), so every
// parameter's gradient is bitwise the one of the plain forward.
TEST(GPT, CheckpointedBlocksGiveBitwiseTheSameGradients) {
  examples::GPTConfig c = tiny_config();
  c.dropout = 0.1;
  manual_seed(3);
  Tensor x = randint(0, 11, {4, 8}), y = randint(0, 11, {4, 8});
  auto gradients = [&](const examples::CheckpointMode& mode) {
    manual_seed(9);
    examples::GPT model(c);
    examples::Forward forward = examples::checkpointed_forward(parts_of(model), mode, x);
    manual_seed(10);  // the same Dropout masks in every mode
    cross_entropy(forward(x).flatten(0, 1), y.flatten()).backward();
    std::vector<std::vector<double>> grads;
    for (const Tensor& p : model.parameters()) grads.push_back(values(p.grad()));
    return grads;
  };
  const auto plain = gradients({"none"});
  EXPECT_EQ(gradients({"blocks"}), plain);
  EXPECT_EQ(gradients({"sqrt"}), plain);
  // The tightest budget the planner can meet: it has to checkpoint.
  manual_seed(9);
  examples::GPT probe(c);
  EXPECT_EQ(gradients({"budget", examples::profile_step_budget(parts_of(probe), x).smallest()}), plain);
}

// Note [Exporting a run for PyTorch]: the files hold the weights before training and exactly the
// batches, in order, that training then sees.
TEST(GPT, ExportedRunHoldsWhatTrainingSees) {
  ember::testing::TempDir temp;
  manual_seed(3);
  examples::GPT model(tiny_config());
  std::vector<int64_t> ids(81);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 11);
  auto windows = examples::next_token_windows(from_vector<int64_t>(ids, {81}, TensorOptions(kInt64)), 8);
  data::DataLoader train(windows, data::DataLoaderOptions().batch_size(3).shuffle(true).seed(5));
  data::DataLoader val(windows, data::DataLoaderOptions().batch_size(4));
  const int64_t steps = examples::export_run(temp.path("run"), model, train, val, 2, {{"layers", "3"}});
  EXPECT_EQ(steps, 2 * train.size());

  nn::Metadata metadata;
  const nn::StateDict init = nn::load_safetensors(temp.path("run/init.safetensors"), &metadata);
  EXPECT_EQ(metadata.at("layers"), "3");
  EXPECT_EQ(metadata.at("steps"), std::to_string(steps));
  for (const auto& [name, t] : model.state_dict()) EXPECT_EQ(values(init.at(name)), values(t)) << name;

  const nn::StateDict got = nn::load_safetensors(temp.path("run/batches.safetensors"));
  const std::vector<int64_t> sizes = got.at("batch_sizes").to_vector<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(sizes.size()), steps);
  int64_t row = 0;
  size_t step = 0;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {  // the loader starts again at epoch 0
    EXPECT_EQ(train.epoch(), epoch);
    for (data::Batch& b : train) {
      ASSERT_LT(step, sizes.size());
      ASSERT_EQ(b.data.size(0), sizes[step++]);
      EXPECT_EQ(values(got.at("train_inputs").narrow(0, row, b.data.size(0))), values(b.data));
      EXPECT_EQ(values(got.at("train_targets").narrow(0, row, b.data.size(0))), values(b.target));
      row += b.data.size(0);
    }
  }
  EXPECT_EQ(step, sizes.size());
  EXPECT_EQ(row, got.at("train_inputs").size(0));
  const std::vector<int64_t> all{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(values(got.at("val_inputs")), values(windows->get_batch(all).data));
  EXPECT_EQ(values(got.at("val_targets")), values(windows->get_batch(all).target));
}
