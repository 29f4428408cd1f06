// The consumer's second program, built when ember was built with MPI: it links ember::distributed
// as the README says and trains one step data-parallel in a group of one process (no mpirun).
#include <cstdio>

#include <ember/ember.h>

#include "distributed/distributed.h"

using namespace ember;

int main() {
  auto group = distributed::init_process_group({distributed::Backend::MPI, /*require_launcher=*/false});
  nn::Linear layer(2, 2);
  distributed::DistributedDataParallel ddp(layer, group);
  ddp(ones({3, 2})).sum().backward();
  // One rank: the average is the gradient itself, d(sum)/d(bias) = 3 per output.
  const bool ok = group->size() == 1 && layer.bias.grad().defined() && layer.bias.grad().at({0}) == 3.0;
  std::printf("consumer_distributed: %s\n", ok ? "ok" : "wrong gradient");
  return ok ? 0 : 1;
}
