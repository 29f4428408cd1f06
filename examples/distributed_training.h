#pragma once
// --distributed for the example programs: data-parallel training over the processes mpirun
// started, one model replica per process (docs/distributed.md):
//   mpirun -np 2 ./train_mlp --distributed                 (MPI, on the CPU)
//   mpirun -np 2 ./train_mlp --distributed --device cuda   (NCCL, GPU 0 and GPU 1)
// Each rank trains on its shard of the training set (config.rank, config.world_size: a
// DistributedSampler in fashion_mnist_loaders) at --batch-size per rank, so the global batch is
// world_size times that; DistributedDataParallel averages the gradients; rank 0 alone prints,
// evaluates and saves (fit). Without the flag the program runs as before, in one process.
// The ranks first compare their flags (Note [Ranks that must agree] in distributed/agreement.h)
// and refuse to start unless they train with the same ones.
#include <memory>

#include <CLI/CLI.hpp>

#include "examples/training.h"
#include "nn/module.h"

namespace ember::examples {

void add_distributed_flag(CLI::App& app, bool& distributed);

class DistributedTraining {
 public:
  // With `enabled`, joins the launcher's process group (NCCL when config.device is a GPU, then
  // set to this rank's GPU; MPI otherwise) and sets config.rank and world_size (an Error when
  // the program was not started by mpirun); otherwise a single process. Then checks that every
  // rank parsed the same values into `app`'s flags, except those that say where a process reads
  // and writes and how many threads it uses: an Error on every rank naming the first that differs.
  DistributedTraining(bool enabled, TrainConfig& config, const CLI::App& app);
  ~DistributedTraining();
  DistributedTraining(const DistributedTraining&) = delete;
  DistributedTraining& operator=(const DistributedTraining&) = delete;

  // The forward to train `model` with: `forward` itself in one process; with --distributed,
  // `forward` with DistributedDataParallel's buffer broadcast first and its gradient hooks on
  // `model`'s parameters. Call once, after the model is on its device.
  Forward wrap(nn::Module& model, Forward forward);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ember::examples
