#include "examples/distributed_training.h"

#include <set>

#include "core/check.h"
#include "distributed/agreement.h"
#include "distributed/distributed.h"

namespace ember::examples {

namespace {

// The flags each process may set for itself: where it reads and writes, how many threads it
// uses. Every other flag must be the same on every rank, a flag added later included.
const std::set<std::string> kPerProcessFlags{"--threads", "--workers", "--data", "--csv", "--save", "--checkpoint-path",
                                             "--help"};

// Each flag's value as parsed: what the command line gave, or the default. (Compared as text:
// --lr 0.05 and --lr 5e-2 count as different, which the message shows.)
distributed::Settings training_flags(const CLI::App& app) {
  distributed::Settings flags;
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = option->get_name();
    if (kPerProcessFlags.contains(name)) continue;
    std::string value;
    for (const std::string& given : option->results()) value += (value.empty() ? "" : " ") + given;
    if (option->count() == 0) value = option->get_default_str().empty() ? "(not given)" : option->get_default_str();
    flags.emplace_back(name, value);
  }
  return flags;
}

}  // namespace

void add_distributed_flag(CLI::App& app, bool& distributed) {
  app.add_flag("--distributed", distributed,
               "data-parallel over the processes `mpirun -np N` started (--batch-size is per process; "
               "MPI on the CPU, NCCL with --device cuda: one GPU per process)");
}

struct DistributedTraining::State {
  std::shared_ptr<distributed::ProcessGroup> group;
  std::unique_ptr<distributed::DistributedDataParallel> ddp;
};

DistributedTraining::DistributedTraining(bool enabled, TrainConfig& config, const CLI::App& app)
    : state_(std::make_unique<State>()) {
  if (!enabled) return;
  // The backend follows the device: MPI reduces CPU tensors, NCCL CUDA tensors, each rank on the
  // GPU of its place on its machine (local rank), whatever index --device named.
  const bool on_gpu = Device(config.device).is_cuda();
  state_->group = distributed::init_process_group(
      {.backend = on_gpu ? distributed::Backend::NCCL : distributed::Backend::MPI});
  if (on_gpu) config.device = state_->group->device().str();
  config.rank = state_->group->rank();
  config.world_size = state_->group->size();
  std::string per_process;
  for (const std::string& flag : kPerProcessFlags)
    if (flag != "--help") per_process += (per_process.empty() ? "" : ", ") + flag;
  distributed::check_ranks_agree(*state_->group, training_flags(app), "[--distributed]",
                                 "every rank must train with the same flags (only " + per_process + " may differ)");
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
