#include "examples/training.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/memory_history.h"
#include "core/memory_limit.h"
#include "core/out_of_memory.h"
#include "data/idx.h"
#include "data/subset.h"
#include "examples/training_checkpoint.h"
#include "serialize/safetensors.h"
#include "utils/atomic_file.h"
#include "utils/memory_snapshot.h"

namespace ember::examples {

namespace {

using Clock = std::chrono::steady_clock;

// --memory-snapshot's folder: setup() keeps it for run_main, which sees the error but no config.
std::string memory_snapshot_dir;

// The memory snapshot of the device that refused `error`'s request, when --memory-snapshot asked.
void write_memory_snapshot_of(const OutOfMemoryError& error, const std::string& program) {
  if (memory_snapshot_dir.empty()) return;
  try {
    const utils::MemorySnapshotFiles files =
        utils::write_memory_snapshot(memory_snapshot_dir, error.facts().device, error.what());
    std::fprintf(stderr, "memory snapshot: %s, %s\n", files.json.c_str(), files.svg.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: no memory snapshot: %s\n", program.c_str(), e.what());
  }
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One line per epoch, redrawn in place on a terminal; in a log, a line every tenth of the epoch.
class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, int64_t batches, std::string unit)
      : epoch_(epoch), epochs_(epochs), batches_(batches), unit_(std::move(unit)), tty_(isatty(STDOUT_FILENO)),
        start_(Clock::now()) {}

  void update(int64_t batch, double loss, double acc, int64_t targets) {
    const bool last = batch == batches_;
    if (!tty_ && !last && batch % std::max<int64_t>(batches_ / 10, 1) != 0) return;
    const double elapsed = seconds_since(start_);
    const double eta = elapsed / static_cast<double>(batch) * static_cast<double>(batches_ - batch);
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * batch / std::max<int64_t>(batches_, 1));
    std::printf("%sepoch %d/%d [%s%s] %lld/%lld loss %.4f acc %.4f %.0f %s/s ETA %.0fs%s", tty_ ? "\r" : "", epoch_,
                epochs_, std::string(static_cast<size_t>(filled), '=').c_str(),
                std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), static_cast<long long>(batch),
                static_cast<long long>(batches_), loss, acc, static_cast<double>(targets) / elapsed, unit_.c_str(), eta,
                tty_ && !last ? "" : "\n");
    std::fflush(stdout);
  }

 private:
  int epoch_, epochs_;
  int64_t batches_;
  std::string unit_;
  bool tty_;
  Clock::time_point start_;
};

// A finite number > 0, or >= 0 when `zero_allowed`.
CLI::Validator finite_number(bool zero_allowed, const std::string& name) {
  const std::string wanted = zero_allowed ? "a finite number >= 0" : "a finite number > 0";
  return CLI::Validator(
      [zero_allowed, wanted](std::string& input) -> std::string {
        double value = 0;
        const bool parsed = CLI::detail::lexical_cast(input, value);
        if (parsed && std::isfinite(value) && (zero_allowed ? value >= 0 : value > 0)) return "";
        return "expected " + wanted + ", got '" + input + "'";
      },
      name);
}

}  // namespace

const CLI::Validator kPositive = finite_number(/*zero_allowed=*/false, "POSITIVE");
const CLI::Validator kNonNegative = finite_number(/*zero_allowed=*/true, "NON-NEGATIVE");

int64_t mib_to_bytes(double mib, const std::string& what) {
  constexpr double kMaxMiB = static_cast<double>(int64_t{1} << 43);
  EMBER_CHECK(std::isfinite(mib) && mib > 0 && mib < kMaxMiB, "[", what,
              "] expected a number of MiB > 0 and below 2^43, got ", mib);
  return static_cast<int64_t>(mib * 1024 * 1024);
}

double median(std::vector<double> values) {
  EMBER_CHECK(!values.empty(), "[median] no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int run_main(CLI::App& app, int argc, char** argv, const std::string& program, const std::function<void()>& body) {
  try {
    app.parse(argc, argv);
    body();
    return 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    if (const auto* out_of_memory = dynamic_cast<const OutOfMemoryError*>(&e))
      write_memory_snapshot_of(*out_of_memory, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: error: an unknown exception\n", program.c_str());
  }
  return 1;
}

void ensure_passive_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the default policy.
}

void add_common_flags(CLI::App& app, TrainConfig& c) {
  app.add_option("--epochs", c.epochs, "training epochs")->check(kPositive)->capture_default_str();
  app.add_option("--batch-size", c.batch_size, "images per batch")->check(kPositive)->capture_default_str();
  app.add_option("--lr", c.lr, "peak learning rate")->check(kPositive)->capture_default_str();
  app.add_option("--threads", c.threads, "CPU threads (0: every core)")->check(kNonNegative)->capture_default_str();
  app.add_option("--device", c.device, "cpu or cuda")
      ->check([](const std::string& spec) -> std::string {
        try {
          (void)Device(spec);
          return "";
        } catch (const std::exception&) {  // Device's own error, or the index's std::out_of_range
          return "expected cpu, cuda or cuda:N, got '" + spec + "'";
        }
      })
      ->capture_default_str();
  app.add_option("--data", c.data, "Fashion-MNIST directory (default: $EMBER_DATA or /usr/share/datasets)");
  app.add_option("--save", c.save, "write the trained weights to this safetensors file");
  // (CLI11 would read -1 as 2^64 - 1 for an unsigned seed.)
  app.add_option("--seed", c.seed, "random seed (runs are reproducible for a seed)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--csv", c.csv, "per-epoch metrics file");
  app.add_option("--workers", c.workers, "data loading threads")->check(kNonNegative)->capture_default_str();
  app.add_option("--train-limit", c.train_limit, "train on the first N images only (0: all)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_option("--save-every", c.save_every, "save a training checkpoint every N epochs")->check(kPositive);
  app.add_option("--checkpoint-path", c.checkpoint_path,
                 "where --save-every writes (default: <program>_checkpoint.safetensors)");
  app.add_option("--resume", c.resume, "continue training from this training checkpoint");
  app.add_option("--amp", c.amp, "mixed precision: none (float32), bf16 or fp16 autocast (fp16 scales the loss)")
      ->check(CLI::IsMember({"none", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_option("--memory-limit", c.memory_limit,
                 "a limit on the training device's memory: bytes with B, KB, MB, GB, KiB, MiB or GiB, or a % of it");
  app.add_option(
      "--memory-snapshot", c.memory_snapshot,
      "record the allocator's history and, on running out of memory, write it to this folder as JSON and SVG");
}

AmpScope::AmpScope(const std::string& amp, Device device) {
  EMBER_CHECK(amp == "none" || amp == "bf16" || amp == "fp16", "[amp] expected none, bf16 or fp16, got '", amp, "'");
  if (amp != "none") autocast_.emplace(device.type, amp == "bf16" ? kBFloat16 : kFloat16);
}

optim::GradScalerOptions amp_scaler_options(const std::string& amp) {
  return optim::GradScalerOptions().enabled(amp == "fp16");
}

Device setup(const TrainConfig& c) {
  set_num_threads(c.threads > 0 ? c.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  manual_seed(c.seed);
  const Device device(c.device);
  if (!c.memory_limit.empty())
    memory::set_limit(device,
                      memory::parse_bytes(c.memory_limit, memory::device_memory_bytes(device), "--memory-limit"));
  if (!c.memory_snapshot.empty()) {
    memory::record_history(true);
    memory_snapshot_dir = c.memory_snapshot;
  }
  return device;
}

Loaders fashion_mnist_loaders(const TrainConfig& c, bool augment) {
  // Fashion-MNIST's training-set pixel mean and standard deviation (after scaling to [0, 1]).
  const data::Normalize normalize({0.2860}, {0.3530});
  std::shared_ptr<const data::Dataset> train = std::make_shared<data::FashionMNIST>(c.data, /*train=*/true);
  if (c.train_limit > 0) train = std::make_shared<data::Subset>(train, c.train_limit);
  auto train_options = data::DataLoaderOptions().batch_size(c.batch_size).seed(c.seed).num_workers(c.workers);
  if (c.world_size > 1)
    train_options.sampler(std::make_shared<data::DistributedSampler>(c.world_size, c.rank,
                                                                    data::DistributedSamplerOptions{.seed = c.seed}));
  else
    train_options.shuffle(true);
  if (augment) train_options.transform(data::Compose(data::RandomCrop(28, 2), data::RandomHorizontalFlip(), normalize));
  else train_options.transform(normalize);
  auto test_options = data::DataLoaderOptions().batch_size(256).num_workers(c.workers).transform(normalize);
  return {std::make_unique<data::DataLoader>(train, train_options),
          std::make_unique<data::DataLoader>(std::make_shared<data::FashionMNIST>(c.data, /*train=*/false), test_options)};
}

Tensor target_loss(const Tensor& output, const Tensor& target) {
  return cross_entropy(output.flatten(0, -2), target.flatten());
}

namespace {
// How many targets got the highest score.
int64_t correct_targets(const Tensor& output, const Tensor& target) {
  NoGradGuard no_grad;
  return static_cast<int64_t>(sum(argmax(output.detach(), -1) == target).item());
}
}  // namespace

Evaluation evaluate(nn::Module& model, data::DataLoader& loader, Device device, const std::string& amp,
                    int64_t max_rows) {
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const AmpScope autocast(amp, device);
  int64_t correct = 0, total = 0;
  double loss_sum = 0;
  for (data::Batch& b : loader) {
    const int64_t rows = b.data.size(0);
    const int64_t step = max_rows > 0 ? std::min(max_rows, rows) : rows;
    for (int64_t first = 0; first < rows; first += step) {
      const int64_t n = std::min(step, rows - first);
      Tensor output = model(b.data.narrow(0, first, n).to(device)), target = b.target.narrow(0, first, n).to(device);
      correct += correct_targets(output, target);
      loss_sum += target_loss(output, target).item() * static_cast<double>(target.numel());
      total += target.numel();
    }
  }
  model.train(was_training);
  if (total == 0) return {};
  return {loss_sum / static_cast<double>(total), static_cast<double>(correct) / static_cast<double>(total)};
}

RunResult fit(nn::Module& model, const Forward& forward, optim::Optimizer& optimizer, optim::LRScheduler* scheduler,
              data::DataLoader& train, data::DataLoader& test, const TrainConfig& c, const std::string& program) {
  const Device device(c.device);
  const std::string checkpoint_path =
      c.checkpoint_path.empty() ? program + "_checkpoint.safetensors" : c.checkpoint_path;
  const bool main = c.main_process();  // the rank that prints, evaluates and saves
  // Fail now rather than after the training the save was for.
  if (main && !c.save.empty()) utils::check_can_save(c.save, program);
  if (main && c.save_every > 0) utils::check_can_save(checkpoint_path, program);
  optim::GradScaler scaler(amp_scaler_options(c.amp));
  const TrainingState state{model, optimizer, scheduler, train, &scaler};
  // A resumed run must see the data in the same order (Note [Training checkpoints]), and compute
  // in the same precision.
  const nn::Metadata run{{"program", program},
                         {"seed", std::to_string(c.seed)},
                         {"batch_size", std::to_string(c.batch_size)},
                         {"train_limit", std::to_string(c.train_limit)},
                         {"amp", c.amp}};

  memory::reset_peak(device);
  TrainingProgress done;
  if (!c.resume.empty()) {
    done = load_training_checkpoint(c.resume, state, run);
    EMBER_CHECK(done.epochs < c.epochs, "[", program, "] ", c.resume, " has already trained ", done.epochs,
                " epoch(s), and --epochs is ", c.epochs, ": nothing left to train");
    if (main) std::printf("resumed from %s after epoch %lld\n", c.resume.c_str(), static_cast<long long>(done.epochs));
  }

  // The metrics file is made when the first epoch ends, so a run that fails before (the memory wall
  // in its first step) leaves no partial output; whether it can be written is checked now.
  const std::string csv_path = c.csv.empty() ? program + "_metrics.csv" : c.csv;
  std::ofstream csv;
  if (main) utils::check_can_save(csv_path, program);

  int64_t step_peak = 0;
  for (int epoch = static_cast<int>(done.epochs) + 1; epoch <= c.epochs; ++epoch) {
    model.train();
    ProgressBar bar(epoch, c.epochs, train.size(), c.unit);
    const auto epoch_start = Clock::now();
    double loss_sum = 0, epoch_wait = 0;
    int64_t correct = 0, seen = 0, batch_index = 0;
    auto wait_start = Clock::now();
    for (data::Batch& b : train) {
      epoch_wait += seconds_since(wait_start);
      Tensor x = b.data.to(device), y = b.target.to(device);
      // The step's own peak: the device's peak so far is kept before the statistic restarts.
      const MemoryStats before = memory::stats(device);
      done.peak_bytes = std::max(done.peak_bytes, before.peak_bytes);
      memory::reset_peak(device);
      Tensor logits, loss;
      {
        const AmpScope autocast(c.amp, device);
        logits = forward(x);
        loss = target_loss(logits, y);
      }
      // A NaN or infinite loss would step every weight to NaN and train on silently (a corrupted
      // checkpoint, a too-large lr): stop before the step, naming it.
      const double loss_value = loss.item();
      EMBER_CHECK(std::isfinite(loss_value), "[train] the loss is ", loss_value, " at step ", done.steps + 1,
                  " (epoch ", epoch, ", batch ", batch_index + 1, "); stopping before the optimizer step");
      // Counted now, so that backward runs without the logits: the graph keeps what the loss
      // needs, and a GPT's logits (batch x context x vocabulary) would be held for nothing.
      correct += correct_targets(logits, y);
      logits = Tensor();
      optimizer.zero_grad();
      scaler.scale(loss).backward();
      step_peak = std::max(step_peak, memory::stats(device).peak_bytes - before.live_bytes);
      scaler.step(optimizer);  // optimizer.step(), unless --amp fp16's scaled gradients overflowed
      scaler.update();
      if (scheduler) scheduler->step();
      const int64_t n = y.numel();
      loss_sum += loss_value * static_cast<double>(n);
      seen += n;
      ++done.steps;
      ++batch_index;
      if (main) bar.update(batch_index, loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen), seen);
      wait_start = Clock::now();
    }
    const double epoch_seconds = seconds_since(epoch_start);
    done.train_seconds += epoch_seconds;
    done.wait_seconds += epoch_wait;
    done.images += seen;
    if (!main) {  // training only; rank 0 reports
      done.epochs = epoch;
      done.wall_seconds += seconds_since(epoch_start);
      continue;
    }
    // Under a memory limit, the evaluation's forward takes the training batch's rows at a time: the
    // training step was planned to fit with them (Note [Planning for a memory limit]).
    const Evaluation tested = evaluate(model, test, device, c.amp, memory::limit(device) ? c.batch_size : 0);
    done.test_loss = tested.loss;
    done.test_acc = tested.accuracy;
    done.epochs = epoch;
    done.peak_bytes = std::max(done.peak_bytes, memory::stats(device).peak_bytes);
    std::printf("epoch %d/%d: train loss %.4f, train acc %.4f, %s loss %.4f, %s acc %.4f, %.1f s, %.0f %s/s\n",
                epoch, c.epochs, loss_sum / static_cast<double>(seen),
                static_cast<double>(correct) / static_cast<double>(seen), c.eval_set.c_str(), done.test_loss,
                c.eval_set.c_str(), done.test_acc, epoch_seconds, static_cast<double>(seen) / epoch_seconds, c.unit.c_str());
    std::ostringstream row;
    row << epoch << ',' << loss_sum / static_cast<double>(seen) << ',' << static_cast<double>(correct) / static_cast<double>(seen)
        << ',' << done.test_loss << ',' << done.test_acc << ',' << optimizer.group_lr(0) << ',' << epoch_seconds << ','
        << static_cast<double>(seen) / epoch_seconds << ',' << done.peak_bytes << '\n';
    if (!csv.is_open()) {
      csv.open(csv_path);
      EMBER_CHECK(csv, "[", program, "] cannot write '", csv_path, "'");
      csv << "epoch,train_loss,train_acc,test_loss,test_acc,lr,seconds,targets_per_s,peak_bytes\n" << done.csv_rows;
    }
    done.csv_rows += row.str();
    csv << row.str() << std::flush;
    done.wall_seconds += seconds_since(epoch_start);
    if (c.save_every > 0 && epoch % c.save_every == 0) {
      save_training_checkpoint(checkpoint_path, state, done, run);
      std::printf("saved a training checkpoint to %s\n", checkpoint_path.c_str());
    }
  }

  RunResult r;
  r.test_acc = done.test_acc;
  r.test_loss = done.test_loss;
  r.epochs = static_cast<int>(done.epochs);
  r.wall_s = done.wall_seconds;
  r.images_per_s = done.train_seconds > 0 ? static_cast<double>(done.images) / done.train_seconds : 0;
  r.step_ms = done.steps ? 1000.0 * (done.train_seconds - done.wait_seconds) / static_cast<double>(done.steps) : 0;
  r.data_wait_pct = done.train_seconds > 0 ? 100.0 * done.wait_seconds / done.train_seconds : 0;
  r.peak_bytes = done.peak_bytes;
  r.step_peak_bytes = step_peak;
  r.amp = c.amp;
  if (!main) return r;
  if (!c.save.empty()) {
    nn::save(model, c.save);
    std::printf("saved the trained weights to %s\n", c.save.c_str());
  }
  std::printf("summary: %s loss %.4f, %s accuracy %.4f after %d epoch(s), wall %.1f s, %.0f %s/s, step %.1f ms, "
              "data wait %.1f%% of training time, peak memory %s (a step's: %s) (metrics in %s)\n",
              c.eval_set.c_str(), r.test_loss, c.eval_set.c_str(), r.test_acc, r.epochs, r.wall_s, r.images_per_s, c.unit.c_str(), r.step_ms, r.data_wait_pct,
              memory::format_bytes(r.peak_bytes).c_str(), memory::format_bytes(r.step_peak_bytes).c_str(),
              csv_path.c_str());
  return r;
}

std::string result_line(const RunResult& r, const std::string& extra) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "result test_acc=%.4f epochs=%d wall_s=%.1f images_per_s=%.0f peak_bytes=%lld step_ms=%.2f "
                "step_peak_bytes=%lld amp=%s",
                r.test_acc, r.epochs, r.wall_s, r.images_per_s, static_cast<long long>(r.peak_bytes), r.step_ms,
                static_cast<long long>(r.step_peak_bytes), r.amp.c_str());
  return extra.empty() ? std::string(buf) : std::string(buf) + " " + extra;
}

}  // namespace ember::examples
