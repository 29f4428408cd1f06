#pragma once
// What a training run trains on, written out for another framework to train on too.
#include <cstdint>
#include <string>

#include "data/dataloader.h"
#include "nn/module.h"
#include "serialize/safetensors.h"

namespace ember::examples {

// Note [Exporting a run for PyTorch]
// bench/compare_gpt.py trains train_gpt's GPT in PyTorch and compares the validation loss. "The
// same run" means the same initial weights, the same batches in the same order and the same
// validation examples; rather than re-deriving the text, the vocabulary, the windows and the
// loader's shuffle in Python, export_run writes what ember will train on, into `dir`:
//   init.safetensors     the model's state dict, before the first step
//   batches.safetensors  train_inputs / train_targets: every training batch of epochs 0 ..
//                        epochs - 1, concatenated in step order; batch_sizes [steps];
//                        val_inputs / val_targets: the validation examples in order
// both with `settings` plus "steps" as metadata. Iterating the loader here does not disturb the
// training that follows: each epoch's order is a pure function of (seed, epoch) (Note
// [Deterministic augmentation] in data/random_stream.h), and the loader is set back to epoch 0.
// Returns the number of steps.
int64_t export_run(const std::string& dir, const nn::Module& model, data::DataLoader& train, data::DataLoader& val,
                   int64_t epochs, nn::Metadata settings);

}  // namespace ember::examples
