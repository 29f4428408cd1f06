// distributed_training.h in a build without MPI (EMBER_MPI=OFF or no MPI found): one process,
// and --distributed says why it cannot do more.
#include "core/check.h"
#include "examples/distributed_training.h"

namespace ember::examples {

void add_distributed_flag(CLI::App& app, bool& distributed) {
  app.add_flag("--distributed", distributed, "data-parallel over MPI processes (not in this build: no MPI)");
}

struct DistributedTraining::State {};

DistributedTraining::DistributedTraining(bool enabled, TrainConfig&, const CLI::App&) {
  EMBER_CHECK(!enabled, "[--distributed] this build of ember has no MPI (configure with EMBER_MPI=ON after "
              "installing libopenmpi-dev)");
}

DistributedTraining::~DistributedTraining() = default;

Forward DistributedTraining::wrap(nn::Module&, Forward forward) { return forward; }

}  // namespace ember::examples
