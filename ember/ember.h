#pragma once
// ember's public API in one include, for programs written against ember:
//   #include <ember/ember.h>
// Tensors and ops with autograd, generators (manual_seed), memory statistics, nn, optim,
// safetensors files, activation checkpointing and data loading. The headers themselves include each other as
// "core/tensor.h", relative to ember's source root (Note [Installed layout] in
// cmake/install.cmake).

// Tensors, ops, errors, randomness, memory, the version.
#include "core/allocator.h"
#include "core/autocast.h"
#include "core/check.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "core/version.h"

// Autograd: grad mode, autograd::grad, custom functions, saved-tensor hooks, gradcheck, to_dot.
#include "core/autograd/engine.h"
#include "core/autograd/function.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/saved_tensor.h"
#include "core/autograd/to_dot.h"

// Modules, layers, losses, initialisation.
#include "nn/nn.h"

// Saving and loading state dicts and modules as safetensors files.
#include "serialize/safetensors.h"

// Optimizers, learning-rate schedulers, gradient clipping.
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/reduce_lr_on_plateau.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"

// Activation checkpointing, its planner and the memory timeline.
#include "utils/checkpoint.h"
#include "utils/checkpoint_sequential.h"
#include "utils/memory_timeline.h"
#include "utils/planner.h"

// Data sets, transforms, DataLoader, the WordPiece tokenizer.
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/subset.h"
#include "data/transforms.h"
#include "data/wordpiece.h"

// The CUDA backend's device queries (cuda::is_available, synchronize), when ember has one:
// linking ember::ember defines EMBER_WITH_CUDA in a CUDA build.
#ifdef EMBER_WITH_CUDA
#include "cuda/context.h"
#endif
