#pragma once
// Note [Training checkpoints]
// A training checkpoint holds everything the next epoch depends on, so that training N epochs
// straight, and training k, saving, and resuming in a fresh process for the other N - k, give
// bitwise the same weights. It is one safetensors file (Note [safetensors]), written atomically
// (Note [Atomic saves]), with the parts under prefixed keys:
//     model.<key>      the model's state_dict: parameters and buffers (BatchNorm statistics)
//     optim.<key>      the optimizer's state_dict: momentum buffers, step counts, hyper-parameters
//     sched.<key>      the LR scheduler's state_dict (its step count), when there is one
//     scaler.<key>     the GradScaler's state_dict (its scale), when it is enabled (--amp fp16)
//     rng.<device>     every default generator's (seed, offset) as int64 [2]: Dropout's masks
//     progress.<name>  epochs and steps done and the running totals of the summary, 0-d tensors
// and string metadata: the format, the model and optimizer names, whatever the caller needs to
// match (the program, the settings that fix the data order) and the CSV rows of the epochs done.
// The DataLoader's shuffling and augmentation are a pure function of (seed, epoch) (Note
// [Deterministic augmentation]), so the loader needs no state of its own: resuming sets its
// epoch to the epochs done.
//
// Loading checks the metadata before anything else, so a checkpoint of another model, optimizer
// or run fails with an ember::Error naming the file and both values. The later checks (the
// state dicts' keys and shapes) run part by part: after such an error the objects may be half
// loaded, and the program should stop, as the examples do.
#include <cstdint>
#include <string>

#include "data/dataloader.h"
#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "serialize/safetensors.h"

namespace ember::examples {

// What a training run has done so far.
struct TrainingProgress {
  int64_t epochs = 0;  // completed
  int64_t steps = 0;
  int64_t images = 0;
  int64_t peak_bytes = 0;  // the most the allocator held on the training device
  double train_seconds = 0, wait_seconds = 0, wall_seconds = 0;
  double test_loss = 0, test_acc = 0;  // after the latest epoch
  std::string csv_rows;  // one line per epoch, as in the metrics CSV

  // visit("name", field) for each number above, so saving and loading list them once.
  template <class Self, class Visit>
  static void numbers(Self& p, Visit&& visit) {
    visit("epochs", p.epochs);
    visit("steps", p.steps);
    visit("images", p.images);
    visit("peak_bytes", p.peak_bytes);
    visit("train_seconds", p.train_seconds);
    visit("wait_seconds", p.wait_seconds);
    visit("wall_seconds", p.wall_seconds);
    visit("test_loss", p.test_loss);
    visit("test_acc", p.test_acc);
  }
};

// The objects a checkpoint saves and restores.
struct TrainingState {
  nn::Module& model;
  optim::Optimizer& optimizer;
  optim::LRScheduler* scheduler;  // may be null
  data::DataLoader& train;
  optim::GradScaler* scaler = nullptr;  // may be null; saved when enabled
};

// `run`: metadata a resumed run must match exactly, e.g. {"program": "train_mlp", "seed": "1"}.
void save_training_checkpoint(const std::string& path, const TrainingState& state, const TrainingProgress& progress,
                              const nn::Metadata& run);
TrainingProgress load_training_checkpoint(const std::string& path, const TrainingState& state,
                                          const nn::Metadata& run);

}  // namespace ember::examples
