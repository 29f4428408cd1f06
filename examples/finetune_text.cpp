// Fine-tunes a pretrained sentence encoder, sentence-transformers' all-MiniLM-L6-v2 (a 6-layer
// BERT, examples/bert.h), to tell which collection of Debian's fortunes package a fortune comes
// from. scripts/install-deps puts the model in kDefaultModelDir (--model DIR elsewhere): its
// model.safetensors and vocab.txt; nothing is downloaded at run time.
//   ./finetune_text                          the linear-probe baseline, then the fine-tuning
//   ./finetune_text --freeze-encoder         the linear probe alone
//   ./finetune_text --checkpoint layers      each encoder layer but the last checkpointed
//   ./finetune_text --checkpoint budget=MB   the planner's choice for a training step of MB
// The fortunes are split by a hash of their text (Note [Splitting the fortunes] in
// examples/fortune_collections.h); the training set trains, the validation set is evaluated after
// every epoch, the test set once at the end. Each text is cut to --max-length WordPiece tokens,
// [CLS] and [SEP] included. The fine-tuning trains the whole model with AdamW (no weight decay on
// biases, LayerNorms and embeddings), the learning rate rising linearly from 0 over the first
// --warmup-ratio of the steps and falling linearly to 0 at the last (BERT's schedule). With the
// common flags of examples/training.h (--epochs, --batch-size, --lr, --threads, --save, --resume,
// --amp, ...). The last line printed is machine-readable:
//   result test_acc=... baseline_probe_acc=... majority_acc=... steps=... examples_per_s=...
//          tokens_per_s=... peak_bytes=... step_peak_bytes=... checkpoint=... test_loss=... amp=...
// --export DIR writes the initial weights and the batches for bench/compare_finetune.py (Note
// [Exporting a run for PyTorch] in examples/run_export.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <sstream>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/memory_limit.h"
#include "data/wordpiece.h"
#include "examples/bert.h"
#include "examples/char_text.h"
#include "examples/fortune_collections.h"
#include "examples/gpt.h"
#include "examples/length_grouped_sampler.h"
#include "examples/run_export.h"
#include "examples/training.h"
#include "optim/adamw.h"

using namespace ember;

namespace {

// Where scripts/install-deps unpacks the model.
constexpr const char* kDefaultModelDir = "/usr/local/share/ember/all-MiniLM-L6-v2";
// Distinct subjects with 580 to 1200 fortunes each.
constexpr const char* kDefaultCollections = "computers,definitions,politics,science,songs-poems,men-women";

struct Settings {
  std::string model_dir = kDefaultModelDir;
  std::string collections = kDefaultCollections;
  int64_t max_length = 64;
  double dropout = 0.1;
  double weight_decay = 0.01;
  double warmup_ratio = 0.1;
  std::string checkpoint = "none";
  bool freeze_encoder = false;
  int probe_epochs = 20;
  double probe_lr = 1e-2;
  std::string export_dir;
};

void add_finetune_flags(CLI::App& app, Settings& s) {
  app.add_option("--model", s.model_dir, "folder with model.safetensors and vocab.txt")->capture_default_str();
  app.add_option("--collections", s.collections, "comma-separated fortune collections, one class each")
      ->capture_default_str();
  app.add_option("--max-length", s.max_length, "WordPiece tokens per text, [CLS] and [SEP] included")
      ->check(CLI::Range(int64_t{3}, int64_t{512}))
      ->capture_default_str();
  app.add_option("--dropout", s.dropout,
                 "dropout after the embeddings, on the attention probabilities, in every layer and before the head")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--weight-decay", s.weight_decay, "AdamW weight decay of the matmul weights")
      ->check(examples::kNonNegative)
      ->capture_default_str();
  app.add_option("--warmup-ratio", s.warmup_ratio, "fraction of the steps of linear learning-rate warm-up")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--checkpoint", s.checkpoint,
                 "none; layers: each encoder layer but the last checkpointed; or budget=MB: what to checkpoint "
                 "planned so that a training step fits MB (examples/checkpoint_mode.h); or auto: budget= from "
                 "--memory-limit")
      ->capture_default_str();
  app.add_flag("--freeze-encoder", s.freeze_encoder,
               "train the classification head alone on the pretrained encoder's sentence embeddings (the "
               "linear probe) and skip the fine-tuning");
  app.add_option("--probe-epochs", s.probe_epochs, "epochs of the linear probe")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--probe-lr", s.probe_lr, "the linear probe's AdamW learning rate")
      ->check(examples::kPositive)
      ->capture_default_str();
  app.add_option("--export", s.export_dir,
                 "write the initial weights, every training batch in order and the test set to this folder "
                 "(bench/compare_finetune.py trains PyTorch on them)");
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

// A split as model inputs: int64 [N, 2, T], the token ids and the attention mask stacked (Note
// [Classifying a sentence with BERT]), the labels int64 [N] and each text's length in tokens.
struct EncodedSplit {
  Tensor inputs, labels;
  std::vector<int64_t> lengths;
};

EncodedSplit encode(const data::WordPieceTokenizer& tokenizer, const examples::LabelledTexts& split,
                    int64_t max_length) {
  const data::WordPieceTokenizer::Batch batch = tokenizer.encode_batch(split.texts, max_length);
  const auto n = static_cast<int64_t>(split.labels.size());
  return {stack({batch.ids, batch.attention_mask}, 1), from_vector<int64_t>(split.labels, {n}, TensorOptions(kInt64)),
          batch.attention_mask.sum({1}).to_vector<int64_t>()};
}

// The examples `rows` of a split, in that order.
std::shared_ptr<data::TensorDataset> rows_of(const EncodedSplit& split, const std::vector<int64_t>& rows) {
  const Tensor index = from_vector<int64_t>(rows, {static_cast<int64_t>(rows.size())}, TensorOptions(kInt64));
  return std::make_shared<data::TensorDataset>(index_select(split.inputs, 0, index),
                                               index_select(split.labels, 0, index));
}

// An evaluation set shortest text first, so that its batches, cut to their longest text, carry
// little padding; the order does not change an accuracy.
std::shared_ptr<data::TensorDataset> by_length(const EncodedSplit& split) {
  std::vector<int64_t> rows(split.lengths.size());
  std::iota(rows.begin(), rows.end(), int64_t{0});
  std::stable_sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) {
    return split.lengths[static_cast<size_t>(a)] < split.lengths[static_cast<size_t>(b)];
  });
  return rows_of(split, rows);
}

// The fraction of `labels` that the most frequent label of `train` is.
double majority_accuracy(const std::vector<int64_t>& train, const std::vector<int64_t>& labels) {
  std::map<int64_t, int64_t> counts;
  for (int64_t label : train) ++counts[label];
  const int64_t majority =
      std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  return static_cast<double>(std::count(labels.begin(), labels.end(), majority)) / static_cast<double>(labels.size());
}

// The pretrained encoder's sentence embeddings of a set, in eval mode and without autograd.
std::shared_ptr<data::TensorDataset> embeddings_of(examples::BertClassifier& model, data::DataLoader& loader,
                                                   Device device, const std::string& amp) {
  model.eval();
  NoGradGuard no_grad;
  const examples::AmpScope autocast(amp, device);
  std::vector<Tensor> features, labels;
  for (data::Batch& b : loader) {
    features.push_back(model.embed(b.data.to(device)).to(kFloat32));
    labels.push_back(b.target.to(device));
  }
  model.train();
  return std::make_shared<data::TensorDataset>(cat(features), cat(labels));
}

// Note [The linear-probe baseline]
// What fine-tuning is measured against: the pretrained encoder left as it is, and a fresh
// Linear(hidden, classes) trained on its sentence embeddings (the probe). The embeddings are
// computed once, in eval mode (no dropout), so the probe's epochs cost next to nothing; the head
// trains with AdamW at --probe-lr, batches of --batch-size, for --probe-epochs epochs, and its
// accuracy on the test set is the baseline. Training the same head on the same features inside
// the full model with the encoder frozen would give the same numbers, one encoder forward per
// step slower.
double linear_probe(examples::BertClassifier& model, data::DataLoader& train, data::DataLoader& test,
                    const examples::TrainConfig& config, const Settings& s, Device device) {
  // Reading the training set once advances its loader to the next epoch's order; fine-tuning
  // must start from the epoch it would have without the probe (and that --export writes).
  const int64_t train_epoch = train.epoch();
  auto train_features = embeddings_of(model, train, device, config.amp);
  auto test_features = embeddings_of(model, test, device, config.amp);
  train.set_epoch(train_epoch);
  nn::Linear head(model.bert.config.hidden, model.classifier.weight.size(0));
  head.to(device);
  data::DataLoader batches(train_features,
                           data::DataLoaderOptions().batch_size(config.batch_size).shuffle(true).seed(config.seed));
  data::DataLoader test_batches(test_features, data::DataLoaderOptions().batch_size(256));
  optim::AdamW optimizer(head.parameters(), optim::AdamWOptions(s.probe_lr));
  for (int epoch = 0; epoch < s.probe_epochs; ++epoch) {
    batches.set_epoch(epoch);
    for (data::Batch& b : batches) {
      optimizer.zero_grad();
      examples::target_loss(head(b.data), b.target).backward();
      optimizer.step();
    }
  }
  return examples::evaluate(head, test_batches, device).accuracy;
}

// BERT's schedule: the lr rises linearly from 0 over `warmup` steps, then falls linearly to 0 at
// `total` steps.
std::unique_ptr<optim::LRScheduler> warmup_linear_decay(optim::Optimizer& optimizer, int64_t warmup, int64_t total) {
  return std::make_unique<optim::LambdaLR>(optimizer, [warmup, total](int64_t step) {
    if (step < warmup) return static_cast<double>(step) / static_cast<double>(warmup);
    return std::max(0.0, static_cast<double>(total - step) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
  });
}

}  // namespace

int main(int argc, char** argv) {
  examples::ensure_passive_openmp_wait(argv);
  CLI::App app{"Fine-tune all-MiniLM-L6-v2 to tell which fortune collection a fortune comes from"};
  examples::TrainConfig config;
  // Sized to finish in minutes on the project's 2-core machine (the measured runs: README,
  // "Fine-tuning a pretrained BERT"; bench/RESULTS.md, "Figures that code comments used to quote").
  config.epochs = 1;
  config.batch_size = 32;
  config.lr = 1e-4;
  config.unit = "ex";
  config.eval_set = "validation";  // fit() evaluates on it; the test set is scored once, at the end
  Settings s;
  examples::add_common_flags(app, config);
  app.get_option("--data")->description(std::string("fortunes directory (default ") + examples::kFortunesDir + ")");
  app.get_option("--batch-size")->description("texts per batch");
  app.get_option("--train-limit")->description("train on the first N training texts only (0: all)");
  add_finetune_flags(app, s);
  return examples::run_main(app, argc, argv, "finetune_text", [&] {
    // layers: the encoder's own blocks mode (checkpoint_bert_layers, examples/bert.h).
    EMBER_CHECK(s.checkpoint == "none" || s.checkpoint == "layers" || s.checkpoint == "auto" ||
                    s.checkpoint.starts_with("budget="),
                "[finetune_text] unknown --checkpoint mode '", s.checkpoint, "' (none, layers, budget=MB or auto)");
    examples::CheckpointMode mode =
        examples::parse_checkpoint_mode(s.checkpoint == "layers" ? "blocks" : s.checkpoint, "finetune_text");
    const Device device = examples::setup(config);
    const std::vector<std::string> names = split_commas(s.collections);
    const examples::FortuneSplits splits =
        examples::split_fortune_collections(config.data.empty() ? examples::kFortunesDir : config.data, names);
    const auto tokenizer = data::WordPieceTokenizer::from_vocab_file(s.model_dir + "/vocab.txt");
    const EncodedSplit train_split = encode(tokenizer, splits.train, s.max_length);
    // --train-limit: the first N texts of a fixed shuffle of the training set (the same for every
    // seed), so that every collection keeps its share.
    const auto n_train = static_cast<int64_t>(splits.train.texts.size());
    std::vector<int64_t> train_rows = data::shuffled_indices(n_train, 0);
    if (config.train_limit > 0 && config.train_limit < n_train) train_rows.resize(static_cast<size_t>(config.train_limit));
    std::vector<int64_t> train_lengths;
    for (int64_t row : train_rows) train_lengths.push_back(train_split.lengths[static_cast<size_t>(row)]);
    auto train_set = rows_of(train_split, train_rows);
    auto val_set = by_length(encode(tokenizer, splits.validation, s.max_length));
    auto test_set = by_length(encode(tokenizer, splits.test, s.max_length));
    data::DataLoader train(train_set, data::DataLoaderOptions()
                                          .batch_size(config.batch_size)
                                          .sampler(std::make_shared<examples::LengthGroupedSampler>(
                                              train_lengths, config.batch_size, config.seed))
                                          .num_workers(config.workers));
    data::DataLoader val(val_set, data::DataLoaderOptions().batch_size(128).num_workers(config.workers));
    data::DataLoader test(test_set, data::DataLoaderOptions().batch_size(128).num_workers(config.workers));
    const int64_t tokens = std::accumulate(train_lengths.begin(), train_lengths.end(), int64_t{0});
    std::printf("fortunes: %zu collections (%s), %lld training, %lld validation, %lld test texts; %.1f tokens per "
                "training text (at most %lld)\n",
                names.size(), s.collections.c_str(), static_cast<long long>(train_set->size()),
                static_cast<long long>(val_set->size()), static_cast<long long>(test_set->size()),
                static_cast<double>(tokens) / static_cast<double>(train_set->size()),
                static_cast<long long>(s.max_length));

    examples::BertConfig bert;
    bert.dropout = bert.attention_dropout = s.dropout;
    examples::BertClassifier model(bert, static_cast<int64_t>(names.size()));
    examples::load_pretrained_bert(model.bert, s.model_dir + "/model.safetensors");
    model.to(device);
    if (mode.kind == "blocks") examples::checkpoint_bert_layers(model.bert);
    const double majority = majority_accuracy(splits.train.labels, splits.test.labels);
    const double probe = linear_probe(model, train, test, config, s, device);
    std::printf("baselines: majority class %.4f, linear probe %.4f (test accuracy)\n", majority, probe);
    if (s.freeze_encoder) {
      std::printf("result test_acc=%.4f baseline_probe_acc=%.4f majority_acc=%.4f steps=0 peak_bytes=%lld checkpoint=%s "
                  "amp=%s\n",
                  probe, probe, majority, static_cast<long long>(memory::stats(device).peak_bytes),
                  s.checkpoint.c_str(), config.amp.c_str());
      return;
    }

    if (!s.export_dir.empty()) {
      const int64_t steps = examples::export_run(
          s.export_dir, model, train, test, config.epochs,
          {{"classes", std::to_string(names.size())}, {"dropout", std::to_string(s.dropout)},
           {"lr", std::to_string(config.lr)}, {"weight_decay", std::to_string(s.weight_decay)},
           {"warmup_ratio", std::to_string(s.warmup_ratio)}, {"val_set", "test"}});
      std::printf("exported the initial weights and %lld batches to %s\n", static_cast<long long>(steps),
                  s.export_dir.c_str());
    }
    optim::AdamW optimizer(
        examples::gpt_param_groups(model, optim::AdamWOptions(config.lr).weight_decay(s.weight_decay)));
    const int64_t total_steps = config.epochs * train.size();
    const auto warmup = static_cast<int64_t>(s.warmup_ratio * static_cast<double>(total_steps));
    std::unique_ptr<optim::LRScheduler> schedule = warmup_linear_decay(optimizer, warmup, total_steps);
    examples::Forward forward = [&model](const Tensor& x) { return model(x); };
    // budget and auto plan; under a memory limit, none measures the step for the error's advice.
    if (mode.kind == "budget" || mode.kind == "auto" || (mode.kind == "none" && memory::limit(device))) {
      // Planned on a batch of the longest texts: shorter batches hold less under the same plan.
      // (Token 1 everywhere: drawing random ids would move the generator, and the run would drop
      // other activations than the plain run does.)
      Tensor sample = ones({config.batch_size, 2, s.max_length}, TensorOptions(kInt64).with_device(device));
      mode.to_come = examples::bytes_to_come(optimizer, train, static_cast<int64_t>(sample.nbytes()), device);
      const examples::AmpScope autocast(config.amp, device);  // the step is profiled in its dtypes
      forward = examples::checkpointed_forward(examples::stacked(model), mode, sample);
    }
    examples::RunResult r = examples::fit(model, forward, optimizer, schedule.get(), train, val, config, "finetune_text");
    const examples::Evaluation tested =
        examples::evaluate(model, test, device, config.amp, memory::limit(device) ? config.batch_size : 0);
    std::printf("test: loss %.4f, accuracy %.4f (linear probe %.4f, majority class %.4f)\n", tested.loss,
                tested.accuracy, probe, majority);
    std::printf("result test_acc=%.4f baseline_probe_acc=%.4f majority_acc=%.4f steps=%lld examples_per_s=%.2f "
                "tokens_per_s=%.0f peak_bytes=%lld step_peak_bytes=%lld checkpoint=%s test_loss=%.9g amp=%s\n",
                tested.accuracy, probe, majority, static_cast<long long>(total_steps), r.images_per_s,
                r.images_per_s * static_cast<double>(tokens) / static_cast<double>(train_set->size()), static_cast<long long>(r.peak_bytes),
                static_cast<long long>(r.step_peak_bytes), s.checkpoint.c_str(), tested.loss, config.amp.c_str());
  });
}
