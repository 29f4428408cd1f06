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
//   queued     rank 0 starts three allreduce_async, times out waiting for the first while rank 1
//              sleeps, drops the Works and their tensors and allocates new ones; rank 1 then
//              wakes and joins the three, and both start a second group: the later MPI calls
//              complete rank 0's abandoned requests, which must not write the new tensors
//   queued-ddp the same through DDP, one bucket per parameter: the wait for the first bucket
//              times out, DDP drops the others, and the DDP object is destroyed
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "distributed/distributed.h"
#include "distributed_helpers.h"

using namespace ember;
using namespace ember::distributed;

namespace {

// Far beyond the timeout, and beyond the test's own bound: a rank that is not stopped by the
// job's abort makes the test fail by running out of time, not by passing late.
void stop_for_good() { std::this_thread::sleep_for(std::chrono::seconds(600)); }

// Beyond the 1 s timeout of the queued modes, but the rank comes back.
void stall_and_return() { std::this_thread::sleep_for(std::chrono::seconds(3)); }

// After rank 0's timeout: tensors allocated where the dropped collectives' buffers were (the
// caching allocator hands a freed block to the next request of its size), then a later MPI call
// on both ranks, a second group's barrier, which completes every request still outstanding.
// Rank 0 says whether the new tensors kept their value.
void allocate_then_call_mpi_again(int rank, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> fresh;
  for (int64_t n : sizes) fresh.push_back(full({n}, 7.0));
  const auto second = init_process_group({.timeout = std::chrono::seconds(60)});
  second->barrier();
  if (rank != 0) return;
  int64_t written = 0;
  for (const Tensor& t : fresh) written += static_cast<int64_t>(sum(t != 7.0).item());
  std::printf(written == 0 ? "rank 0: the tensors allocated after the timeout kept their values\n"
                           : "rank 0: %lld elements of the tensors allocated after the timeout were overwritten\n",
              static_cast<long long>(written));
}

void queued(ProcessGroup& group) {
  const std::vector<int64_t> sizes{65536, 65536, 65536};
  std::vector<Tensor> buffers;
  for (int64_t n : sizes) buffers.push_back(full({n}, 1.0));
  if (group.rank() == 1) {
    stall_and_return();
    group.set_timeout(std::chrono::seconds(60));
  }
  std::vector<std::unique_ptr<Work>> works;
  for (const Tensor& b : buffers) works.push_back(group.allreduce_async(b));
  try {
    for (auto& w : works) w->wait();
  } catch (const Error& e) {
    std::printf("rank %d: %s\n", group.rank(), e.what());
  }
  works.clear();
  buffers.clear();
  allocate_then_call_mpi_again(group.rank(), sizes);
}

void queued_ddp(const std::shared_ptr<ProcessGroup>& group) {
  testutil::GlobalBatch batch = testutil::global_batch();
  testutil::SmallNet net(128, false);
  std::vector<int64_t> sizes;
  for (const Tensor& p : net.parameters()) sizes.push_back(p.numel());
  {
    DistributedDataParallel ddp(net, group, {.bucket_cap_bytes = 1});  // a bucket per parameter
    cross_entropy(ddp(batch.x), batch.y).backward();
    if (group->rank() == 1) {
      stall_and_return();
      group->set_timeout(std::chrono::seconds(60));
    }
    try {
      cross_entropy(ddp(batch.x), batch.y).backward();
    } catch (const Error& e) {
      std::printf("rank %d: %s\n", group->rank(), e.what());
    }
  }
  allocate_then_call_mpi_again(group->rank(), sizes);
}

void run(const std::string& mode) {
  const bool queued_mode = mode == "queued" || mode == "queued-ddp";
  const auto group = init_process_group({.timeout = std::chrono::seconds(queued_mode ? 1 : 2)});
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
  } else if (mode == "queued") {
    queued(*group);
    return;
  } else if (mode == "queued-ddp") {
    queued_ddp(group);
    return;
  } else {
    EMBER_FAIL("unknown mode '", mode, "': stall, stall-ddp, lost, link, queued or queued-ddp");
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
