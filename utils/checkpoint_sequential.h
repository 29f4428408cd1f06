#pragma once
// Checkpointing applied to whole models: segments of a stack of modules run in order (a Sequential,
// or a ModuleList such as a transformer's blocks), or chosen blocks of any model.
#include <functional>

#include "nn/sequential.h"
#include "utils/checkpoint.h"
#include "utils/layer_chain.h"

namespace ember::utils {

// Runs the chain's layers in order, each on the previous one's output (a Sequential's forward; a
// ModuleList has none, so this is how its blocks run checkpointed; any chain of layers, Note
// [Chains of layers]), with PyTorch's segment semantics: the layers are cut into `segments` runs
// of size size() / segments; every run but the last is checkpointed, the last (with the
// remainder) runs normally since its activations are needed first in backward anyway.
// segments = 1 is therefore the plain forward.
Tensor checkpoint_sequential(const LayerChain& chain, int64_t segments, const Tensor& x,
                             const CheckpointOptions& options = {});

// Checkpointing as a switch on an existing model: every module (at any depth) for which `which`
// returns true runs through utils::checkpoint when called, until uncheckpoint_modules() takes
// it off again (the rollback). Returns how many modules were switched.
int checkpoint_modules(nn::Module& root, const std::function<bool(nn::Module&)>& which,
                       const CheckpointOptions& options = {});
int uncheckpoint_modules(nn::Module& root);

// checkpoint_modules<nn::BasicBlock>(model): every module of that type.
template <class M>
int checkpoint_modules(nn::Module& root, const CheckpointOptions& options = {}) {
  return checkpoint_modules(root, [](nn::Module& m) { return dynamic_cast<M*>(&m) != nullptr; }, options);
}

}  // namespace ember::utils
