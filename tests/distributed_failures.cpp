// Two-rank programs in which one rank misbehaves, for the tests that check what the other one
// says (Note [Collective timeouts]). ctest runs each under `mpirun -np 2` (tests/CMakeLists.txt)
// and checks the output:
//   stall      rank 1 stops (sleeps far longer than the 2 s timeout) before the second allreduce:
//              rank 0's allreduce fails naming rank 1, and the job is aborted (rank 1 with it)
//   stall-ddp  the same before rank 1's second backward: rank 0's wait for a DDP bucket fails
//   lost       rank 1 is killed before the second allreduce: when mpirun then terminates rank 0,
//              rank 0 says which rank it was waiting for
//   link       allreduces every 100 ms for a minute, for tests/distributed_two_hosts.sh, which
//              takes the network link between the ranks down meanwhile: an allreduce times out
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "core/check.h"
#include "distributed/distributed.h"
#include "distributed_helpers.h"

using namespace ember;
using namespace ember::distributed;

namespace {

// Far beyond the timeout, and beyond the test's own bound: a rank that is not stopped by the
// job's abort makes the test fail by running out of time, not by passing late.
void stop_for_good() { std::this_thread::sleep_for(std::chrono::seconds(600)); }

void run(const std::string& mode) {
  const auto group = init_process_group({.timeout = std::chrono::seconds(2)});
  EMBER_CHECK(group->size() == 2, "run under mpirun -np 2");
  Tensor t = ones({4});
  group->allreduce(t);
  if (mode == "stall" || mode == "lost") {
    if (group->rank() == 1) {
      if (mode == "lost") std::raise(SIGKILL);
      stop_for_good();
    }
    if (mode == "lost") group->set_timeout(std::chrono::minutes(5));  // mpirun ends this rank first
    group->allreduce(t);
  } else if (mode == "stall-ddp") {
    testutil::GlobalBatch batch = testutil::global_batch();
    testutil::SmallNet net(8, false);
    DistributedDataParallel ddp(net, group);
    for (int step = 0; step < 2; ++step) {
      if (step == 1 && group->rank() == 1) stop_for_good();
      cross_entropy(ddp(batch.x), batch.y).backward();
    }
  } else if (mode == "link") {
    std::printf("rank %d: allreducing\n", group->rank());
    std::fflush(stdout);
    for (int i = 0; i < 600; ++i) {
      group->allreduce(t);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else {
    EMBER_FAIL("unknown mode '", mode, "': stall, stall-ddp, lost or link");
  }
  std::printf("rank %d: no failure\n", group->rank());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(argc > 1 ? argv[1] : "");
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "distributed_failures: %s\n", e.what());
    return 1;
  }
}
