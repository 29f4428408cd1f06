// ember::distributed's NCCL backend on CUDA tensors (Note [NCCL collectives]). Run alone it is a
// group of one on GPU 0, which still runs every NCCL call, stream and event of the backend; under
// `mpirun -np N` on a machine with N GPUs the same tests check N ranks (the expected values are
// written for any size). Every test skips without a CUDA device; scripts/gpu-check runs them on
// the GPU machine, where a skip is a failure.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cuda/check.h"
#include "cuda/context.h"
#include "distributed/distributed.h"
#include "distributed_helpers.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::distributed;
using ember::testutil::expect_error;

namespace {

std::shared_ptr<ProcessGroup> world_ptr() {
  static std::shared_ptr<ProcessGroup> group = init_process_group({Backend::NCCL, /*require_launcher=*/false});
  return group;
}
ProcessGroup& world() { return *world_ptr(); }

#define SKIP_WITHOUT_GPU() \
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device"

// A tensor on the group's GPU.
Tensor on_gpu(const Tensor& t) { return t.to(world().device()); }

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Holds ember's stream of `device` until the stall is destroyed: a host function queued on the
// stream, which keeps everything queued after it from starting. It lets go by itself after 5 s,
// so that a backend that waits for the stream makes a test fail, readably and within gpu-check's
// time limit for the step, instead of hang. A backend that does not wait never needs that long:
// every wait in these tests ends at the group's 0.3 s timeout.
class StreamStall {
 public:
  explicit StreamStall(Device device) : stream_(cuda::stream(device.index)) {
    CUDA_CHECK(cudaLaunchHostFunc(stream_, &StreamStall::hold, &released_));
  }
  ~StreamStall() {
    released_ = true;
    (void)cudaStreamSynchronize(stream_);  // hold() has returned: released_ may go
  }
  StreamStall(const StreamStall&) = delete;
  StreamStall& operator=(const StreamStall&) = delete;

 private:
  static void hold(void* released) {
    const Clock::time_point until = Clock::now() + std::chrono::seconds(5);
    while (!static_cast<std::atomic<bool>*>(released)->load() && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(1));
  }
  cudaStream_t stream_;
  std::atomic<bool> released_{false};
};

// A group of one of its own, with a short timeout, for the tests that break it. It starts under
// the default timeout: starting a communicator (NCCL's topology search, its buffers, its proxy
// thread) may itself take longer than the 0.3 s its collectives get.
std::shared_ptr<ProcessGroup> group_to_break() {
  std::shared_ptr<ProcessGroup> group = init_process_group({Backend::NCCL, /*require_launcher=*/false});
  group->set_timeout(milliseconds(300));
  return group;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

TEST(NcclCollectives, TheGroupIsOnThisRanksGpu) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  EXPECT_EQ(g.backend(), Backend::NCCL);
  EXPECT_TRUE(g.device().is_cuda());
  EXPECT_LT(g.rank(), g.size());
}

TEST(NcclCollectives, AllreduceSumsAndAverages) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  const double n = g.size(), r = g.rank();
  // Rank r holds (r + 1) * [1, 10, 100]: the sum is n (n + 1) / 2 times that.
  const double total = n * (n + 1) / 2;
  Tensor sum = on_gpu(tensor({r + 1, 10 * (r + 1), 100 * (r + 1)}));
  g.allreduce(sum, ReduceOp::Sum);
  EXPECT_TRUE(sum.device().is_cuda());
  testutil::expect_near(sum, {total, 10 * total, 100 * total});
  Tensor avg = on_gpu(tensor({r + 1, 2 * (r + 1)}, kFloat64));
  g.allreduce(avg, ReduceOp::Avg);
  testutil::expect_near(avg, {total / n, 2 * total / n}, 1e-12);
  Tensor counts = on_gpu(tensor({r + 1, 5}).to(kInt64));
  g.allreduce(counts, ReduceOp::Sum);
  EXPECT_EQ(counts.dtype(), kInt64);
  testutil::expect_near(counts, {total, 5 * n}, 0);
  Tensor bytes = on_gpu(tensor({1, 2}).to(kUInt8));
  g.allreduce(bytes, ReduceOp::Sum);
  testutil::expect_near(bytes, {n, 2 * n}, 0);
}

// A transposed view is reduced through a contiguous copy and written back into the view.
TEST(NcclCollectives, AllreduceWritesANonContiguousViewInPlace) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  const double n = g.size();
  Tensor base = on_gpu(arange(6, kFloat32).reshape({2, 3}));
  Tensor view = base.t();
  ASSERT_FALSE(view.is_contiguous());
  g.allreduce(view, ReduceOp::Sum);
  testutil::expect_near(base, {0, n, 2 * n, 3 * n, 4 * n, 5 * n});
}

// The work's tensor is written by the communication stream; after wait() ember's stream sees it.
// 1 << 20 floats: long enough that the reduction is still running when the next op is queued.
TEST(NcclCollectives, AsyncAllreduceIsOrderedBeforeTheNextOp) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  const double r = g.rank(), n = g.size();
  Tensor big = on_gpu(full({1 << 20}, r + 1));
  std::unique_ptr<Work> work = g.allreduce_async(big, ReduceOp::Avg);
  work->wait();
  Tensor doubled = big * 2.0;  // queued on ember's stream after the wait
  EXPECT_TRUE(work->test());
  const double mean = (n + 1) / 2;
  const Tensor host = doubled.to(kCPU);
  EXPECT_EQ(host.at({0}), 2 * mean);
  EXPECT_EQ(host.at({(1 << 20) - 1}), 2 * mean);
  EXPECT_EQ(sum(doubled).item(), 2 * mean * (1 << 20));
}

// A Work dropped without wait() still orders ember's stream after the collective.
TEST(NcclCollectives, AnAsyncWorkDroppedWithoutWaitStillOrdersTheStream) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  Tensor t = on_gpu(full({4096}, 1.0));
  { std::unique_ptr<Work> work = g.allreduce_async(t, ReduceOp::Sum); }
  EXPECT_EQ(min(t).item(), static_cast<double>(g.size()));
}

TEST(NcclCollectives, BroadcastCopiesTheRootsTensor) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  const int root = g.size() - 1;
  Tensor t = on_gpu(full({2, 3}, g.rank() * 10.0 + 1));
  g.broadcast(t, root);
  testutil::expect_near(t, std::vector<double>(6, root * 10.0 + 1));
  // A scalar: no sizes to exchange in the header check.
  Tensor scalar = on_gpu(full({}, g.rank() + 7.0, kInt64));
  g.broadcast(scalar, 0);
  EXPECT_EQ(scalar.item(), 7.0);
}

TEST(NcclCollectives, AllgatherStacksTheRanksTensors) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  const double r = g.rank();
  Tensor mine = on_gpu(tensor({r, 10 + r, 20 + r}, kFloat64)).reshape({3, 1});
  Tensor all = g.allgather(mine);
  EXPECT_TRUE(all.device().is_cuda());
  ASSERT_EQ(all.shape(), (Shape{g.size(), 3, 1}));
  std::vector<double> expected;
  for (int k = 0; k < g.size(); ++k)
    for (double v : {0.0, 10.0, 20.0}) expected.push_back(v + k);
  testutil::expect_near(all, expected, 0);
  // A strided input is gathered from a contiguous copy.
  Tensor strided = on_gpu(arange(4, kFloat32).reshape({2, 2})).t();
  testutil::expect_near(g.allgather(strided).select(0, 0), {0, 2, 1, 3}, 0);
  g.barrier();
}

TEST(NcclCollectives, ClearErrorsForWhatItCannotReduce) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  expect_error([&] { g.allreduce(tensor({1.0f})); },
               "[allreduce] the NCCL backend works on CUDA tensors on this rank's device cuda:");
  expect_error([&] { g.allreduce(tensor({1.0f})); }, "got a tensor on cpu (CPU tensors need the MPI backend");
  expect_error([&] { g.allgather(zeros({2})); }, "[allgather] the NCCL backend works on CUDA tensors");
  expect_error([&] { g.allreduce_async(zeros({2})); }, "[allreduce_async] the NCCL backend works on CUDA tensors");
  expect_error([&] { g.allreduce(on_gpu(tensor({1.0}).to(kInt64)), ReduceOp::Avg); },
               "[allreduce] ReduceOp::Avg needs a floating tensor; got int64");
  expect_error([&] { g.broadcast(on_gpu(tensor({1.0})), g.size()); }, "is not a rank of this group of");
  expect_error([&] { g.allreduce(Tensor()); }, "[allreduce] got an undefined tensor");
  expect_error([&] { g.allreduce_async(on_gpu(ones({2, 3})).t()); }, "[allreduce_async] the tensor must be contiguous");
  // The group still works after the errors: every rank failed at the same check.
  Tensor t = on_gpu(ones({2}));
  g.allreduce(t);
  testutil::expect_near(t, {static_cast<double>(g.size()), static_cast<double>(g.size())});
}

// Note [Collective timeouts] on the GPU. A group of one cannot lose a rank, but its collective
// can be kept from finishing: it waits for ember's stream, which a StreamStall holds. The group's
// start is its collective #1.
TEST(NcclCollectives, ACollectiveThatDoesNotFinishTimesOutAndBreaksTheGroup) {
  SKIP_WITHOUT_GPU();
  if (world().size() > 1) GTEST_SKIP() << "a group of one's test: it stalls one rank's own stream";
  std::shared_ptr<ProcessGroup> group = group_to_break();
  Tensor t = on_gpu(ones({4}));
  {
    const StreamStall stall(group->device());
    const Clock::time_point start = Clock::now();
    expect_error([&] { group->allreduce(t); },
                 "[allreduce] collective #2 of this process group timed out after 0.3 s on rank 0: it did not "
                 "complete (the work queued before it did not finish); the communicator is aborted when the group is "
                 "destroyed");
    EXPECT_LT(seconds_since(start), 10.0) << "the timeout did not bound the wait";
  }
  expect_error([&] { group->barrier(); }, "[barrier] this process group can no longer be used: [allreduce] collective #2");
  const Clock::time_point start = Clock::now();
  group.reset();  // aborts the communicator, without waiting for anyone
  EXPECT_LT(seconds_since(start), 10.0);
  // Other groups, and ember's stream, go on.
  Tensor u = on_gpu(ones({2}));
  world().allreduce(u);
  testutil::expect_near(u, {1, 1});
}

// The same for DDP's kind of wait: Work::wait(), and a Work dropped without one.
TEST(NcclCollectives, AnAsyncCollectiveThatDoesNotFinishTimesOut) {
  SKIP_WITHOUT_GPU();
  if (world().size() > 1) GTEST_SKIP() << "a group of one's test: it stalls one rank's own stream";
  for (bool dropped : {false, true}) {
    std::shared_ptr<ProcessGroup> group = group_to_break();
    Tensor t = on_gpu(ones({1024}));
    {
      const StreamStall stall(group->device());
      const Clock::time_point start = Clock::now();
      std::unique_ptr<Work> work = group->allreduce_async(t);
      EXPECT_FALSE(work->test());
      if (dropped)
        work.reset();  // waits up to the timeout, then abandons the collective
      else
        expect_error([&] { work->wait(); }, "[allreduce_async] collective #2 of this process group timed out after 0.3 s");
      EXPECT_LT(seconds_since(start), 10.0);
    }
    expect_error([&] { group->allreduce(t); }, "[allreduce] this process group can no longer be used: [allreduce_async]");
  }
}

TEST(NcclDataParallel, AModelOnTheCpuIsRejected) {
  SKIP_WITHOUT_GPU();
  testutil::SmallNet net(8, false);
  expect_error([&] { DistributedDataParallel ddp(net, world_ptr()); },
               "parameter 'fc1.weight' is on cpu but the NCCL group's collectives work on cuda:");
}

// DDP on the GPU: bucket copies on ember's stream, reductions on the communication stream while
// backward goes on, the averages written into .grad. At one rank the average is the rank's own
// gradient, so training must be bitwise what it is without DDP; at more ranks every rank trains
// on the same batch, so the average again equals it (within rounding: NCCL sums n copies).
TEST(NcclDataParallel, TrainsOnTheGpuAsTheModelAloneDoes) {
  SKIP_WITHOUT_GPU();
  ProcessGroup& g = world();
  const Device gpu = g.device();
  testutil::GlobalBatch batch = testutil::global_batch();
  const Tensor x = batch.x.to(gpu), y = batch.y.to(gpu);
  for (bool checkpointed : {false, true})
    for (size_t cap : {kDefaultBucketCapBytes, size_t{600}}) {
      manual_seed(7);
      testutil::SmallNet plain(16, checkpointed), wrapped(16, checkpointed);
      wrapped.load_state_dict(plain.state_dict());
      plain.to(gpu);
      wrapped.to(gpu);
      DistributedDataParallel ddp(wrapped, world_ptr(), DataParallelOptions{.bucket_cap_bytes = cap});
      EXPECT_EQ(ddp.buckets().size() > 2, cap == 600);
      EXPECT_EQ(ddp.buckets().front().device, gpu);
      testutil::sgd_steps(plain, plain, x, y, 3);
      testutil::sgd_steps(wrapped, ddp, x, y, 3);
      for (const auto& [name, p] : plain.named_parameters()) {
        const Tensor mine = testutil::parameter(wrapped, name).detach().to(kCPU);
        if (g.size() == 1)
          EXPECT_TRUE(testutil::bitwise_equal(p.detach().to(kCPU), mine)) << name << " checkpointed " << checkpointed;
        else
          EXPECT_LT(testutil::max_abs_difference(p.detach().to(kCPU), mine), 1e-5) << name;
      }
    }
}

TEST(NcclDataParallel, NoSyncAndUnusedParametersWorkOnTheGpu) {
  SKIP_WITHOUT_GPU();
  const Device gpu = world().device();
  testutil::GlobalBatch batch = testutil::global_batch();
  const Tensor x = batch.x.to(gpu), y = batch.y.to(gpu);
  testutil::SmallNet net(16, false);
  nn::Linear unused(3, 3);
  net.register_module("unused", unused);
  net.to(gpu);
  DistributedDataParallel ddp(net, world_ptr(), DataParallelOptions{.find_unused_parameters = true});
  {
    auto local = ddp.no_sync();
    cross_entropy(ddp(x), y).backward();
  }
  const Tensor local_grad = net.head.bias.grad().to(kCPU);
  cross_entropy(ddp(x), y).backward();
  // Every rank has the same batch: the average of 2 * (one batch's gradient) is that again.
  EXPECT_LT(testutil::max_abs_difference(net.head.bias.grad().to(kCPU), local_grad * 2.0), 1e-5);
  ASSERT_TRUE(unused.weight.grad().defined());
  EXPECT_TRUE(unused.weight.grad().device().is_cuda());
  EXPECT_EQ(max(abs(unused.weight.grad())).item(), 0.0);
}
