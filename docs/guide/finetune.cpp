// Fine-tuning a pretrained encoder: load weights written by another library, tokenize text,
// train a classifier on top with the encoder's layers checkpointed.
#include <ember/ember.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using namespace ember;

constexpr int64_t kDim = 16, kHeads = 2, kLayers = 2, kClasses = 2;

// Token embeddings, a transformer encoder, mean pooling over the real tokens, a linear head.
// forward takes the ids and the attention mask: a module with several inputs.
struct Classifier : nn::MultiInputModule<Classifier> {
  nn::Embedding embed;
  nn::TransformerEncoder encoder;
  nn::Linear head{kDim, kClasses};
  Classifier(int64_t vocab, int64_t pad_id)
      : embed(vocab, kDim, pad_id),
        encoder(nn::TransformerEncoderLayerOptions{.d_model = kDim, .nhead = kHeads, .dim_feedforward = 32,
                                                   .dropout = 0.1, .batch_first = true},
                kLayers) {
    register_module("embed", embed);
    register_module("encoder", encoder);
    register_module("head", head);
  }
  Tensor forward(const Tensor& ids, const Tensor& attention_mask) {
    const Tensor padding = (attention_mask == 0.0).to(kUInt8);  // PyTorch's convention: 1 = ignore
    const Tensor h = encoder(embed(ids), Tensor(), padding);
    const Tensor weights = attention_mask.to(kFloat32).unsqueeze(-1);
    return head((h * weights).sum({1}) / weights.sum({1}));
  }
};

int main() {
  manual_seed(0);
  // 1. Somebody's pretrained encoder, saved under their names: "bert.encoder...", and a pooler
  //    our model has no place for. (A real one is a model.safetensors you downloaded.)
  const std::string path = (std::filesystem::temp_directory_path() / "guide_pretrained.safetensors").string();
  {
    nn::TransformerEncoder pretrained(nn::TransformerEncoderLayerOptions{.d_model = kDim, .nhead = kHeads,
                                                                         .dim_feedforward = 32},
                                      kLayers);
    nn::StateDict theirs;
    for (const auto& [key, value] : pretrained.state_dict()) theirs["bert.encoder." + key] = value;
    theirs["bert.pooler.weight"] = randn({kDim, kDim});
    nn::save_safetensors(theirs, path);
  }

  // 2. A tokenizer from a vocabulary (BERT's vocab.txt in practice: from_vocab_file).
  const data::WordPieceTokenizer tokenizer = data::WordPieceTokenizer::from_vocab(
      "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\ndog\nsat\nran\non\nmat\npark\nin\n##s\n", "guide vocab");
  const std::vector<std::string> texts = {"The cat sat on the mat", "The dogs ran in the park",
                                          "Cats sat", "The dog ran"};
  const Tensor labels = from_vector<int64_t>({0, 1, 0, 1}, {4}, TensorOptions(kInt64));
  const data::WordPieceTokenizer::Batch batch = tokenizer.encode_batch(texts);

  // 3. The model, with the pretrained encoder loaded through a key map; the result names what
  //    did not match, so a misnamed layer cannot keep its random weights unnoticed.
  Classifier model(tokenizer.vocab_size(), tokenizer.pad_id());
  const nn::KeyMap map = nn::KeyMap().drop_prefix("bert.pooler.").rename_prefix("bert.encoder.", "");
  const nn::LoadResult loaded = nn::load_state_dict(model.encoder, nn::load_safetensors(path), map);
  EMBER_CHECK(loaded.missing_keys.empty() && loaded.unexpected_keys.empty(), "the checkpoint did not map");
  std::filesystem::remove(path);

  // 4. Fine-tune: every encoder layer checkpointed with its masks, AdamW with a linear warm-up
  //    and a linear decay.
  utils::checkpoint_modules<nn::TransformerEncoderLayer>(model);
  optim::AdamW optimizer(model.parameters(), optim::AdamWOptions(3e-3));
  const int64_t steps = 40, warmup = 4;
  optim::LambdaLR schedule(optimizer, [&](int64_t step) {
    return step < warmup ? double(step + 1) / warmup : double(steps - step) / double(steps - warmup);
  });
  double first = 0, last = 0;
  for (int64_t step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    Tensor loss = cross_entropy(model(batch.ids, batch.attention_mask), labels);
    loss.backward();
    optimizer.step();
    schedule.step();
    (step == 0 ? first : last) = loss.item();
  }
  std::printf("loss %.4f -> %.4f over %lld steps\n", first, last, static_cast<long long>(steps));
  EMBER_CHECK(std::isfinite(last) && last < first, "fine-tuning did not lower the loss");
  return 0;
}
