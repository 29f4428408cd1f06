#include "examples/distributed_training.h"

#include "core/check.h"
#include "distributed/distributed.h"

namespace ember::examples {

void add_distributed_flag(CLI::App& app, bool& distributed) {
  app.add_flag("--distributed", distributed,
               "data-parallel over the processes `mpirun -np N` started (--batch-size is per process; "
               "MPI on the CPU, NCCL with --device cuda: one GPU per process)");
}

struct DistributedTraining::State {
  std::shared_ptr<distributed::ProcessGroup> group;
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
};

DistributedTraining::DistributedTraining(bool enabled, TrainConfig& config) : state_(std::make_unique<State>()) {
  if (!enabled) return;
  // The backend follows the device: MPI reduces CPU tensors, NCCL CUDA tensors, each rank on the
  // GPU of its place on its machine (local rank), whatever index --device named.
  const bool on_gpu = Device(config.device).is_cuda();
  state_->group = distributed::init_process_group(
      {.backend = on_gpu ? distributed::Backend::NCCL : distributed::Backend::MPI});
  if (on_gpu) config.device = state_->group->device().str();
  config.rank = state_->group->rank();
  config.world_size = state_->group->size();
}

DistributedTraining::~DistributedTraining() = default;

Forward DistributedTraining::wrap(nn::Module& model, Forward forward) {
  if (!state_->group) return forward;
  EMBER_CHECK(!state_->ddp, "[DistributedTraining] wrap is called once per program");
  state_->ddp = std::make_unique<distributed::DistributedDataParallel>(model, state_->group);
  distributed::DistributedDataParallel& ddp = *state_->ddp;
  return [&ddp, forward = std::move(forward)](const Tensor& x) {
    ddp.sync_buffers();
    return forward(x);
  };
}

}  // namespace ember::examples
