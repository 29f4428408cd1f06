// Trains a character-level GPT on the fortunes of Debian's `fortunes` package and samples from it:
// token and position embeddings, pre-LayerNorm transformer blocks, AdamW without decay on biases,
// LayerNorms and embeddings, a linear warm-up into a cosine schedule. The last 10% of the text is
// the validation set; its loss is reported in nats and in bits per character (bpc = loss / ln 2).
//   ./train_gpt                                    4 blocks, d = 128, 4 heads, context 128
//   ./train_gpt --checkpoint blocks                each TransformerBlock but the last checkpointed
//   ./train_gpt --amp bf16                         under bfloat16 autocast (examples/training.h)
//   ./train_gpt --context 1024 --attention math    long windows; attention on the math path instead of
//                                                  the fused kernels (core/attention_backend.h)
// --checkpoint none|blocks|sqrt|budget=MB as train_resnet (examples/checkpoint_mode.h), and the
// common flags of examples/training.h: an "epoch" is one pass over the training windows, and
// --train-limit counts windows. The last line printed is machine-readable:
//   result val_loss=... bpc=... steps=... tokens_per_s=... peak_bytes=... checkpoint=... step_peak_bytes=... amp=...
//   attention=...
// (peak_bytes: the device's peak over the run; step_peak_bytes: a training step's, above what was
// live before it, which is what --checkpoint budget=MB bounds).
// --sweep trains nothing: it measures training steps (forward and backward) of 4, 8 and 16 blocks
// under --checkpoint none, blocks and sqrt (each under --amp), the modes taking turns in
// --sweep-rounds rounds, and prints a key=value line for each:
//   ./train_gpt --sweep --context 256
// --export DIR also writes what the run trains on for bench/compare_gpt.py (Note [Exporting a run
// for PyTorch]).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/generator.h"
#include "data/subset.h"
#include "examples/char_text.h"
#include "examples/checkpoint_mode.h"
#include "examples/gpt.h"
#include "examples/run_export.h"
#include "examples/training.h"
#include "optim/lr_scheduler.h"

using namespace ember;

namespace {

struct Settings {
  examples::GPTConfig model;
  double weight_decay = 0.1;
  int64_t warmup = 100;
  int64_t sample_chars = 400;
  double temperature = 0.8;
  int64_t top_k = 10;
  std::string prompt = "The ";
  std::string checkpoint = "none";
  std::string attention = "auto";
  bool sweep = false;
  int sweep_rounds = 5;
  std::string export_dir;
};

void add_gpt_flags(CLI::App& app, Settings& s) {
  const auto count = CLI::Range(int64_t{1}, int64_t{1} << 20);
  app.add_option("--layers", s.model.num_layers, "transformer blocks")->check(count)->capture_default_str();
  app.add_option("--embed-dim", s.model.embed_dim, "model width d")->check(count)->capture_default_str();
  app.add_option("--heads", s.model.num_heads, "attention heads (must divide --embed-dim)")
      ->check(count)
      ->capture_default_str();
  app.add_option("--context", s.model.context, "characters per training window and the position table's size")
      ->check(count)
      ->capture_default_str();
  app.add_option("--dropout", s.model.dropout, "dropout after the embeddings and in every block")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--weight-decay", s.weight_decay, "AdamW weight decay of the matmul weights")
      ->check(examples::kNonNegative)
      ->capture_default_str();
  app.add_option("--warmup", s.warmup, "steps of linear learning-rate warm-up before the cosine decay")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--sample-chars", s.sample_chars, "characters to sample after training")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--temperature", s.temperature, "sampling temperature")
      ->check(examples::kPositive)
      ->capture_default_str();
  app.add_option("--top-k", s.top_k, "sample among the k most likely characters (0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--prompt", s.prompt, "the text the sample continues")->capture_default_str();
  app.add_option("--checkpoint", s.checkpoint, "none, blocks, sqrt, budget=MB or auto (from --memory-limit)")
      ->capture_default_str();
  app.add_option("--attention", s.attention, "attention backend: auto (fused where it applies), math or fused "
                                             "(core/attention_backend.h)")
      ->check(CLI::IsMember({"auto", "math", "fused"}))
      ->capture_default_str();
  app.add_option("--export", s.export_dir,
                 "write the initial weights, every training batch in order and the validation windows to "
                 "this folder (bench/compare_gpt.py trains PyTorch on them)");
  app.add_flag("--sweep", s.sweep, "measure a training step's peak memory and time at 4, 8 and 16 blocks with each "
                                   "checkpoint mode instead of training");
  app.add_option("--sweep-rounds", s.sweep_rounds, "--sweep: timed rounds (one step of each mode per round)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
}

// Linear warm-up from lr / warmup to lr over `warmup` steps, then a cosine down to lr / 10 at the
// last step (nanoGPT's schedule); the cosine alone without warm-up.
std::unique_ptr<optim::LRScheduler> warmup_cosine(optim::Optimizer& optimizer, int64_t warmup, int64_t total_steps) {
  const double min_lr = optimizer.group_lr(0) / 10;
  warmup = std::min(warmup, total_steps - 1);
  if (warmup <= 0) return std::make_unique<optim::CosineAnnealingLR>(optimizer, total_steps, min_lr);
  auto warm = std::make_shared<optim::LinearWarmup>(optimizer, warmup, 1.0 / static_cast<double>(warmup));
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(optimizer, total_steps - warmup, min_lr);
  return std::make_unique<optim::SequentialLR>(
      optimizer, std::vector<std::shared_ptr<optim::LRScheduler>>{warm, cosine}, std::vector<int64_t>{warmup});
}

std::vector<int64_t> ids_of(const Tensor& t) { return t.to_vector<int64_t>(); }

// What --attention ran: math or fused, and for auto the one it picked on `device`.
const char* attention_path(const std::string& choice, Device device) {
  if (choice != "auto") return choice.c_str();
  return auto_attention_is_fused(device) ? "auto(fused)" : "auto(math)";
}

// --sweep: per depth, the three modes' models (the same seed, so the same weights) and random
// tokens, one untimed step each, then --sweep-rounds rounds of one timed training step (forward,
// cross-entropy, backward) per mode, the modes taking turns within a round so that a change in
// the machine's load falls on all three alike. Bytes are the peak above what was live before the
// step (the parameters and the batch), from ember's allocator; they are the same in every step.
// Times are medians over the rounds: the step's wall-clock time, the process's CPU time (all
// threads; other processes on a busy machine inflate it far less), and the ratio of each mode's
// step to the plain step of the same round.
struct SweepMode {
  const char* kind;
  std::unique_ptr<examples::GPT> model;
  examples::Forward forward;
  int64_t peak = 0;
  std::vector<double> ms, cpu_ms, ratio;
};

void sweep(Settings s, const examples::TrainConfig& config, Device device, int64_t vocab_size) {
  using Clock = std::chrono::steady_clock;
  s.model.vocab_size = vocab_size;
  const TensorOptions on_device = TensorOptions(kInt64).with_device(device);
  for (int64_t layers : {4, 8, 16}) {
    s.model.num_layers = layers;
    manual_seed(config.seed);
    const Tensor x = randint(0, vocab_size, {config.batch_size, s.model.context}, on_device);
    const Tensor y = randint(0, vocab_size, {config.batch_size, s.model.context}, on_device);
    std::vector<SweepMode> modes;
    for (const char* kind : {"none", "blocks", "sqrt"}) {
      manual_seed(config.seed);
      auto model = std::make_unique<examples::GPT>(s.model);
      model->to(device);
      examples::GPT& m = *model;
      examples::Forward forward = examples::checkpointed_forward(
          {m, m.blocks, [&m](const Tensor& ids) { return m.stem_forward(ids); },
           [&m](const Tensor& h) { return m.head_forward(h); }},
          {kind}, x);
      modes.push_back({kind, std::move(model), std::move(forward), 0, {}, {}, {}});
    }
    for (int round = 0; round <= s.sweep_rounds; ++round) {  // round 0: warm-up, first-touch page faults
      for (SweepMode& mode : modes) {
        mode.model->zero_grad();
        const int64_t before = memory::stats(device).live_bytes;
        memory::reset_peak(device);
        const auto start = Clock::now();
        const std::clock_t cpu_start = std::clock();
        Tensor loss;
        {
          const examples::AmpScope autocast(config.amp, device);
          loss = cross_entropy(mode.forward(x).flatten(0, 1), y.flatten());
        }
        loss.backward();
        if (round == 0) continue;
        mode.ms.push_back(1000 * std::chrono::duration<double>(Clock::now() - start).count());
        mode.cpu_ms.push_back(1000 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
        mode.ratio.push_back(mode.ms.back() / modes.front().ms.back());
        mode.peak = std::max(mode.peak, memory::stats(device).peak_bytes - before);
      }
    }
    for (const SweepMode& mode : modes) {
      std::printf("sweep layers=%lld context=%lld batch=%lld checkpoint=%s amp=%s peak_bytes=%lld peak_ratio=%.3f "
                  "step_ms=%.1f step_cpu_ms=%.1f time_ratio=%.3f rounds=%d\n",
                  static_cast<long long>(layers), static_cast<long long>(s.model.context),
                  static_cast<long long>(config.batch_size), mode.kind, config.amp.c_str(),
                  static_cast<long long>(mode.peak),
                  static_cast<double>(mode.peak) / static_cast<double>(modes.front().peak), examples::median(mode.ms),
                  examples::median(mode.cpu_ms), examples::median(mode.ratio), s.sweep_rounds);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  examples::ensure_passive_openmp_wait(argv);
  CLI::App app{"Train a character-level GPT on the fortunes of Debian's fortunes package"};
  examples::TrainConfig config;
  // Sized to finish in minutes on the project's 2-core machine (the measured runs: README, "A
  // character-level GPT"; bench/RESULTS.md, "Figures that code comments used to quote").
  config.epochs = 1;
  config.batch_size = 16;
  config.lr = 2e-3;
  config.unit = "tok";
  Settings s;
  examples::add_common_flags(app, config);
  app.get_option("--data")->description(std::string("fortunes directory (default ") + examples::kFortunesDir + ")");
  app.get_option("--batch-size")->description("windows per batch");
  app.get_option("--train-limit")->description("train on the first N windows only (0: all)");
  add_gpt_flags(app, s);
  return examples::run_main(app, argc, argv, "train_gpt", [&] {
    examples::CheckpointMode mode = examples::parse_checkpoint_mode(s.checkpoint, "train_gpt");
    set_attention_backend(s.attention == "math"    ? AttentionBackend::Math
                          : s.attention == "fused" ? AttentionBackend::Fused
                                                   : AttentionBackend::Auto);
    const Device device = examples::setup(config);

    const std::string text = examples::read_fortunes(config.data.empty() ? examples::kFortunesDir : config.data);
    const examples::CharVocab vocab(text);
    const std::vector<int64_t> prompt = ids_of(vocab.encode(s.prompt));  // a bad prompt fails before training
    if (s.sweep) return sweep(s, config, device, vocab.size());
    const size_t split = text.size() - text.size() / 10;  // the last 10% validates
    std::shared_ptr<const data::Dataset> train_set =
        examples::next_token_windows(vocab.encode(std::string_view(text).substr(0, split)), s.model.context);
    if (config.train_limit > 0) train_set = std::make_shared<data::Subset>(train_set, config.train_limit);
    auto val_set = examples::next_token_windows(vocab.encode(std::string_view(text).substr(split)), s.model.context);
    data::DataLoader train(train_set, data::DataLoaderOptions()
                                          .batch_size(config.batch_size)
                                          .shuffle(true)
                                          .seed(config.seed)
                                          .num_workers(config.workers));
    data::DataLoader val(val_set, data::DataLoaderOptions().batch_size(64).num_workers(config.workers));

    s.model.vocab_size = vocab.size();
    examples::GPT model(s.model);
    model.to(device);
    if (!s.export_dir.empty()) {
      const int64_t steps = examples::export_run(
          s.export_dir, model, train, val, config.epochs,
          {{"layers", std::to_string(s.model.num_layers)}, {"embed_dim", std::to_string(s.model.embed_dim)},
           {"heads", std::to_string(s.model.num_heads)}, {"context", std::to_string(s.model.context)},
           {"vocab_size", std::to_string(s.model.vocab_size)}, {"dropout", std::to_string(s.model.dropout)},
           {"lr", std::to_string(config.lr)}, {"warmup", std::to_string(s.warmup)},
           {"weight_decay", std::to_string(s.weight_decay)}});
      std::printf("exported the initial weights and %lld batches to %s\n", static_cast<long long>(steps),
                  s.export_dir.c_str());
    }
    int64_t params = 0;
    for (const Tensor& p : model.parameters()) params += p.numel();
    std::printf("text: %zu characters (%lld distinct), %lld training windows of %lld, %lld validation windows\n"
                "model: %lld blocks, d=%lld, %lld heads, %lld parameters\n",
                text.size(), static_cast<long long>(vocab.size()), static_cast<long long>(train_set->size()),
                static_cast<long long>(s.model.context), static_cast<long long>(val_set->size()),
                static_cast<long long>(s.model.num_layers), static_cast<long long>(s.model.embed_dim),
                static_cast<long long>(s.model.num_heads), static_cast<long long>(params));

    optim::AdamW optimizer(examples::gpt_param_groups(
        model, optim::AdamWOptions(config.lr).betas({0.9, 0.99}).weight_decay(s.weight_decay)));
    const int64_t total_steps = config.epochs * train.size();
    std::unique_ptr<optim::LRScheduler> schedule = warmup_cosine(optimizer, s.warmup, total_steps);

    Tensor sample = randint(0, vocab.size(), {config.batch_size, s.model.context},
                            TensorOptions(kInt64).with_device(device));
    mode.to_come = examples::bytes_to_come(optimizer, train, 2 * static_cast<int64_t>(sample.nbytes()), device);
    examples::Forward forward = [&] {
      const examples::AmpScope autocast(config.amp, device);  // budget=MB profiles the step in its dtypes
      return examples::checkpointed_forward(
          {model, model.blocks, [&model](const Tensor& ids) { return model.stem_forward(ids); },
           [&model](const Tensor& h) { return model.head_forward(h); }},
          mode, sample);
    }();
    sample = Tensor();
    examples::RunResult r = examples::fit(model, forward, optimizer, schedule.get(), train, val, config, "train_gpt");

    const double bpc = r.test_loss / std::log(2.0);
    std::printf("validation: loss %.4f nats, %.4f bits per character\n", r.test_loss, bpc);
    if (s.sample_chars > 0) {
      manual_seed(config.seed);
      const std::string story = vocab.decode(examples::generate(model, prompt, s.sample_chars, s.temperature, s.top_k));
      std::printf("sample (temperature %g, top-k %lld, seed %llu):\n%s\n", s.temperature,
                  static_cast<long long>(s.top_k), static_cast<unsigned long long>(config.seed), story.c_str());
    }
    std::printf("result val_loss=%.4f bpc=%.4f steps=%lld tokens_per_s=%.0f peak_bytes=%lld checkpoint=%s "
                "step_peak_bytes=%lld amp=%s attention=%s\n",
                r.test_loss, bpc, static_cast<long long>(total_steps), r.images_per_s,
                static_cast<long long>(r.peak_bytes), s.checkpoint.c_str(), static_cast<long long>(r.step_peak_bytes),
                config.amp.c_str(), attention_path(s.attention, device));
  });
}
