#pragma once
// The training run fuzz_training_checkpoint resumes into, and write_seeds saves its seeds from:
// the same small model, optimizer, scheduler, loader and enabled GradScaler on both sides, so a
// seed passes the checkpoint's identity checks and the fuzzer starts in the deep part of the
// reader (the state dicts) rather than at its first refusal.
#include <memory>

#include "core/ops.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "examples/training_checkpoint.h"
#include "nn/linear.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"

namespace ember::fuzz {

struct TrainingRun {
  nn::Linear model{3, 2};
  optim::SGD optimizer{model.parameters(), optim::SGDOptions(0.1).momentum(0.9)};
  optim::StepLR scheduler{optimizer, 2};
  data::DataLoader train{std::make_shared<data::TensorDataset>(zeros({4, 3}), zeros({4}, TensorOptions(kInt64)))};
  optim::GradScaler scaler;
  // What the checkpoint records of the run, as the examples record their program and seed.
  nn::Metadata run{{"program", "fuzz_training_checkpoint"}};

  examples::TrainingState state() { return {model, optimizer, &scheduler, train, &scaler}; }
};

}  // namespace ember::fuzz
