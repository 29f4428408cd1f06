#pragma once
// The training loop shared by the example programs: flags, a progress bar, evaluation, a CSV of
// per-epoch metrics, training checkpoints to resume from (Note [Training checkpoints]) and the
// machine-readable summary line.
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "data/dataloader.h"
#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace ember::examples {

struct TrainConfig {
  int epochs = 10;
  int64_t batch_size = 128;
  double lr = 0.05;
  int threads = 0;  // 0: every core
  std::string device = "cpu";
  std::string data;  // Fashion-MNIST directory; empty: $EMBER_DATA or Debian's
  std::string save;  // safetensors path for the trained weights
  std::string csv;   // per-epoch metrics; empty: <program>_metrics.csv
  uint64_t seed = 1;
  int workers = 2;
  int64_t train_limit = 0;  // train on the first N images only (0: all)
  int save_every = 0;          // save a training checkpoint every N epochs (0: never)
  std::string checkpoint_path;  // where; empty: <program>_checkpoint.safetensors
  std::string resume;           // a training checkpoint to continue from
  std::string unit = "img";     // what one target is, for the progress bar's rate ("tok" for a language model)
  std::string amp = "none";     // none, bf16 or fp16 (Note [Mixed-precision training steps])
  // --memory-limit: a limit on the training device's memory (Note [Memory limits]), in
  // EMBER_MEMORY_LIMIT's sizes ("2GiB", "50%"); empty: none beyond the environment's.
  std::string memory_limit;
  // --memory-snapshot: a folder for the memory snapshot (utils/memory_snapshot.h) of a run that
  // stops with an OutOfMemoryError; setup() records the memory history for it. Empty: none.
  std::string memory_snapshot;
  // What fit()'s evaluation loader holds, for its output: "validation" where a program keeps its
  // test set apart until the end (finetune_text).
  std::string eval_set = "test";
  // --distributed (examples/distributed_training.h): this process's rank among world_size. Each
  // rank trains on its shard of the training set; rank 0 alone prints, evaluates and saves.
  int rank = 0;
  int world_size = 1;
  bool main_process() const { return rank == 0; }
};

// Flag checks that say what they want. (CLI11's PositiveNumber lets nan through.)
extern const CLI::Validator kPositive;     // a finite number > 0
extern const CLI::Validator kNonNegative;  // a finite number >= 0

// A memory budget given in MiB, in bytes: an ember::Error naming `what` unless it is finite,
// positive and below 2^43 MiB (8 EiB, where the bytes would no longer fit an int64).
int64_t mib_to_bytes(double mib, const std::string& what);

// The median of timings (the mean of the middle two for an even count); an ember::Error when
// there are none. The benchmarks report it over rounds, so one slow round moves nothing.
double median(std::vector<double> values);

// Parses the command line into `app` and runs `body`. Every failure ends the same way: a
// message on stderr and a non-zero exit code, never std::terminate — CLI11's own errors (and
// --help) as CLI11 prints them, an ember::Error or any other exception as "program: message".
// After an OutOfMemoryError, with --memory-snapshot given to setup(), it also writes the memory
// snapshot of the device that refused the request and says where on stderr.
int run_main(CLI::App& app, int argc, char** argv, const std::string& program, const std::function<void()>& body);

// Note [OpenMP wait policy]
// By default an OpenMP thread that finishes its share of a parallel loop spins for a while
// before sleeping. On an idle machine that saves a wake-up; on a busy one (a build, another
// job) a spinning thread takes the core the straggler needs, every loop waits for its slowest
// thread, and a training step got many times slower here (bench/RESULTS.md, "Figures that code
// comments used to quote"). OMP_WAIT_POLICY=PASSIVE makes waiting threads sleep. The OpenMP
// runtime reads it once, when it is loaded — before main() — so a program that finds it unset
// sets it and re-executes itself.
void ensure_passive_openmp_wait(char** argv);

// --epochs --batch-size --lr --threads --device --data --save --seed --csv --workers --train-limit
// --save-every --checkpoint-path --resume --amp --memory-limit --memory-snapshot
void add_common_flags(CLI::App& app, TrainConfig& config);

// Note [Mixed-precision training steps]
// --amp bf16 or fp16 runs each step's forward and loss, and the evaluation, inside an Autocast
// region of that dtype on the training device (Note [Autocast] in core/autocast.h); the backward
// and the optimizer step run outside it, on the float32 parameters, whose gradients arrive in
// float32. fp16 also scales the loss with a GradScaler (Note [Loss scaling] in
// optim/grad_scaler.h), and a training checkpoint keeps the scaler's state; bf16 has float32's
// exponent range and needs no scaling. A checkpoint records --amp, and resuming with another is
// refused: the optimizer state of one precision would go on in another.
class AmpScope {
 public:
  AmpScope(const std::string& amp, Device device);  // amp: none, bf16 or fp16

 private:
  std::optional<Autocast> autocast_;
};
// The GradScaler of a run under --amp: enabled for fp16 only.
optim::GradScalerOptions amp_scaler_options(const std::string& amp);
// Applies --threads, --seed, --memory-limit and --memory-snapshot (which run_main writes); returns
// the device.
Device setup(const TrainConfig& config);

// Fashion-MNIST loaders: the training set (shuffled with config.seed, its first
// config.train_limit images when set, with RandomCrop(28, padding 2) and horizontal flips when
// `augment`; with config.world_size > 1 this rank's shard of it, a DistributedSampler's) and the
// test set, both normalised with the training set's mean and std.
struct Loaders {
  std::unique_ptr<data::DataLoader> train, test;
};
Loaders fashion_mnist_loaders(const TrainConfig& config, bool augment);

struct RunResult {
  double test_acc = 0;
  double test_loss = 0;  // mean cross-entropy per target on the test set, in nats
  int epochs = 0;
  double wall_s = 0;
  double images_per_s = 0;  // targets per second: images, or tokens for a language model
  double step_ms = 0;        // mean training step (forward, backward, optimizer)
  double data_wait_pct = 0;  // time spent waiting for batches, % of training time
  int64_t peak_bytes = 0;    // ember's allocator, on the training device
  // The most a training step's forward, loss and backward held above what was live before it (the
  // parameters, the optimizer's state, the batch), over the steps this run trained: what
  // --checkpoint budget=MB bounds (examples/checkpoint_mode.h). On the CPU it also counts the
  // batches the loader's workers assemble meanwhile (they share the device's allocator).
  int64_t step_peak_bytes = 0;
  std::string amp = "none";  // --amp
};

// A training step's forward pass (model(x) unless the program swaps in a checkpointed one).
using Forward = std::function<Tensor(const Tensor&)>;

// The loss fit trains with: the cross-entropy of output [..., classes] against targets [...],
// averaged over the targets.
Tensor target_loss(const Tensor& output, const Tensor& target);

// Trains for config.epochs epochs, stepping `scheduler` (if any) after every optimizer step, and
// evaluates on `test` after each epoch. The loss is the cross-entropy of the model's output
// [..., classes] against the targets [...]: one class per image ([N, C] and [N]) or one next token
// per position ([N, T, V] and [N, T]); accuracy is the fraction of targets whose class scored
// highest. Prints a progress bar per epoch and a summary. Checks
// first that the weights and checkpoints can be saved where asked; with config.resume, continues
// after the checkpoint's last epoch; with config.save_every, saves a checkpoint every N epochs.
// On a rank other than 0 (--distributed) it only trains: no output, evaluation, metrics or saves;
// the result it returns then holds the training timings alone.
RunResult fit(nn::Module& model, const Forward& forward, optim::Optimizer& optimizer, optim::LRScheduler* scheduler,
              data::DataLoader& train, data::DataLoader& test, const TrainConfig& config, const std::string& program);

// Mean cross-entropy per target and top-1 accuracy of `model` (in eval mode, without autograd,
// under --amp's autocast) over `loader`; with max_rows, at most that many rows of a batch at a time.
struct Evaluation {
  double loss = 0, accuracy = 0;
};
Evaluation evaluate(nn::Module& model, data::DataLoader& loader, Device device, const std::string& amp = "none",
                    int64_t max_rows = 0);

// "result test_acc=0.8853 epochs=10 wall_s=171.2 images_per_s=3512 peak_bytes=123456789 ... amp=none"
std::string result_line(const RunResult& r, const std::string& extra = "");

}  // namespace ember::examples
