// ember::distributed in one process: the launcher check, a group of one (MPI's singleton start,
// no mpirun), the bucket plan, and DistributedDataParallel's bookkeeping, which a group of one
// runs through exactly as a larger group does. tests/test_distributed_mpi.cpp runs two ranks.
#include <gtest/gtest.h>

#include <cstdlib>

#include "distributed/agreement.h"
#include "distributed/distributed.h"
#include "distributed_helpers.h"
#include "test_helpers.h"
#ifdef EMBER_WITH_NCCL
#include "cuda/context.h"
#endif

using namespace ember;
using namespace ember::distributed;
using ember::testutil::expect_error;

namespace {

// Runs fn with the launcher's variables unset (and puts back what was there).
template <class Fn>
void without_launcher(Fn fn) {
  const char* names[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                         "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* n : names)
    if (const char* v = std::getenv(n)) saved.emplace_back(n, v);
  for (const char* n : names) unsetenv(n);
  fn();
  for (const auto& [n, v] : saved) setenv(n.c_str(), v.c_str(), 1);
}

std::shared_ptr<ProcessGroup> single_process_group() {
  std::shared_ptr<ProcessGroup> group;
  without_launcher([&] { group = init_process_group({Backend::MPI, /*require_launcher=*/false}); });
  return group;
}

}  // namespace

TEST(ProcessGroup, WithoutALauncherItSaysHowToLaunch) {
  without_launcher([] {
    EXPECT_FALSE(launch_info_from_environment().has_value());
    expect_error([] { init_process_group(); }, "not started by a launcher");
    expect_error([] { init_process_group(); }, "mpirun -np <processes>");
  });
}

TEST(ProcessGroup, ReadsAndChecksTheLaunchersVariables) {
  without_launcher([] {
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    std::optional<LaunchInfo> info = launch_info_from_environment();
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->rank, 1);
    EXPECT_EQ(info->size, 4);
    EXPECT_EQ(info->local_rank, 1);  // no local rank set: one machine
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    EXPECT_EQ(launch_info_from_environment()->local_rank, 0);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "-1", 1);
    expect_error([] { launch_info_from_environment(); }, "OMPI_COMM_WORLD_LOCAL_RANK='-1' is not a number >= 0");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    setenv("OMPI_COMM_WORLD_RANK", "4", 1);
    expect_error([] { launch_info_from_environment(); }, "OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4");
    setenv("OMPI_COMM_WORLD_RANK", "one", 1);
    expect_error([] { launch_info_from_environment(); }, "OMPI_COMM_WORLD_RANK='one' is not a number >= 0");
    unsetenv("OMPI_COMM_WORLD_RANK");
    expect_error([] { launch_info_from_environment(); }, "OMPI_COMM_WORLD_RANK is not set but OMPI_COMM_WORLD_SIZE is");
    unsetenv("OMPI_COMM_WORLD_SIZE");
  });
}

#ifdef EMBER_WITH_NCCL
// The NCCL backend's first check comes before any NCCL call (tests/test_distributed_nccl.cpp runs
// the backend on a GPU).
TEST(ProcessGroup, NcclWithoutAGpuSaysSo) {
  if (cuda::is_available()) GTEST_SKIP() << "this machine has a CUDA device";
  without_launcher([] {
    expect_error([] { init_process_group({Backend::NCCL, false}); },
                 "the NCCL backend needs a CUDA device, and none is available");
  });
}
#else
TEST(ProcessGroup, NcclIsNotBuiltIntoThisEmber) {
  without_launcher([] {
    expect_error([] { init_process_group({Backend::NCCL, false}); }, "no NCCL backend");
  });
}
#endif

TEST(ProcessGroup, AGroupOfOneRunsEveryCollective) {
  auto group = single_process_group();
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  Tensor t = tensor({1.0f, 2.0f, 3.0f});
  group->allreduce(t, ReduceOp::Sum);
  testutil::expect_near(t, {1, 2, 3});
  group->allreduce(t, ReduceOp::Avg);
  testutil::expect_near(t, {1, 2, 3});
  group->broadcast(t, 0);
  Tensor all = group->allgather(t);
  EXPECT_EQ(all.shape(), (Shape{1, 3}));
  testutil::expect_near(all, {1, 2, 3});
  std::unique_ptr<Work> work = group->allreduce_async(t, ReduceOp::Avg);
  work->wait();
  EXPECT_TRUE(work->test());
  testutil::expect_near(t, {1, 2, 3});
  group->barrier();
}

TEST(ProcessGroup, RejectsWhatItCannotReduce) {
  auto group = single_process_group();
  expect_error([&] { group->allreduce(tensor({1.0f}).to(kInt64), ReduceOp::Avg); },
               "[allreduce] ReduceOp::Avg needs a floating tensor; got int64");
  expect_error([&] { group->broadcast(tensor({1.0f}), 1); }, "[broadcast] root 1 is not a rank of this group of 1");
  expect_error([&] { group->allreduce(Tensor()); }, "[allreduce] got an undefined tensor");
  expect_error([&] { group->allreduce_async(ones({2, 3}).t()); }, "[allreduce_async] the tensor must be contiguous");
}

TEST(ProcessGroup, TheTimeoutIsSettableAndPositive) {
  auto group = single_process_group();
  EXPECT_EQ(group->timeout(), kDefaultTimeout);
  group->set_timeout(std::chrono::seconds(3));
  EXPECT_EQ(group->timeout(), std::chrono::milliseconds(3000));
  expect_error([&] { group->set_timeout(std::chrono::milliseconds(0)); }, "[ProcessGroup] the timeout must be > 0 ms");
  expect_error([] { without_launcher([] { init_process_group({.require_launcher = false, .timeout = {}}); }); },
               "the timeout must be > 0 ms; got 0 ms");
  group->set_timeout(kDefaultTimeout);
}

// In a group of one there is no one to disagree with; the texts round-trip whatever their bytes.
TEST(ProcessGroup, AGroupOfOneAgreesWithItself) {
  auto group = single_process_group();
  const std::string bytes("a\0b\xff", 4);
  EXPECT_EQ(allgather_text(*group, bytes), std::vector<std::string>{bytes});
  EXPECT_EQ(allgather_text(*group, ""), std::vector<std::string>{""});
  check_ranks_agree(*group, {{"--lr", "0.05"}, {"--seed", "1"}}, "[test]", "");
  expect_error([&] { check_ranks_agree(*group, {{"--lr", "a\nb"}}, "[test]", ""); },
               "[check_ranks_agree] setting '--lr' holds a tab or a newline");
}

TEST(ProcessGroup, ReducesANonContiguousTensorInPlace) {
  auto group = single_process_group();
  Tensor base = arange(6, kFloat32).reshape({2, 3});
  Tensor view = base.t();
  group->allreduce(view, ReduceOp::Sum);
  testutil::expect_near(base, {0, 1, 2, 3, 4, 5});
}

TEST(GradientBuckets, PackParametersInReverseOrderUnderTheCap) {
  // float32: 100 elements = 400 bytes. Cap 1000 bytes: 100 + 100 fit, a third does not.
  std::vector<Tensor> params;
  for (int64_t n : {100, 100, 100, 300, 10}) params.push_back(zeros({n}).requires_grad_());
  std::vector<BucketPlan> plan = plan_buckets(params, 1000);
  ASSERT_EQ(plan.size(), 4u);
  // Reverse order: 10 and 300 would be 1240 bytes, so 300 (1200 bytes, over the cap) stands alone.
  ASSERT_EQ(plan[0].slots.size(), 1u);
  EXPECT_EQ(plan[0].slots[0].parameter, 4u);
  ASSERT_EQ(plan[1].slots.size(), 1u);
  EXPECT_EQ(plan[1].slots[0].parameter, 3u);
  ASSERT_EQ(plan[2].slots.size(), 2u);
  EXPECT_EQ(plan[2].slots[0].parameter, 2u);
  EXPECT_EQ(plan[2].slots[1].parameter, 1u);
  EXPECT_EQ(plan[2].slots[1].offset, 100);
  EXPECT_EQ(plan[2].numel, 200);
  ASSERT_EQ(plan[3].slots.size(), 1u);
  EXPECT_EQ(plan[3].slots[0].parameter, 0u);
}

TEST(GradientBuckets, KeepDtypesApartAndSkipFrozenParameters) {
  std::vector<Tensor> params{zeros({4}).requires_grad_(), zeros({4}, kFloat64).requires_grad_(), zeros({4}),
                             zeros({4}).requires_grad_()};
  std::vector<BucketPlan> plan = plan_buckets(params);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].dtype, kFloat32);
  ASSERT_EQ(plan[0].slots.size(), 2u);  // parameters 3 and 0; 2 does not require grad
  EXPECT_EQ(plan[0].slots[0].parameter, 3u);
  EXPECT_EQ(plan[0].slots[1].parameter, 0u);
  EXPECT_EQ(plan[1].dtype, kFloat64);
  EXPECT_EQ(plan[1].slots[0].parameter, 1u);
  expect_error([&] { plan_buckets(params, 0); }, "[plan_buckets] the bucket cap must be > 0 bytes");
}

// With one rank the average is the rank's own gradient: DDP must leave training unchanged,
// with every bucket launched and finished.
TEST(DistributedDataParallel, OneRankTrainsExactlyAsWithout) {
  auto group = single_process_group();
  testutil::GlobalBatch batch = testutil::global_batch();
  for (bool checkpointed : {false, true}) {
    manual_seed(7);
    testutil::SmallNet plain(16, checkpointed), wrapped(16, checkpointed);
    wrapped.load_state_dict(plain.state_dict());
    DistributedDataParallel ddp(wrapped, group, DataParallelOptions{.bucket_cap_bytes = 600});
    EXPECT_GT(ddp.buckets().size(), 2u);
    testutil::sgd_steps(plain, plain, batch.x, batch.y, 3);
    testutil::sgd_steps(wrapped, ddp, batch.x, batch.y, 3);
    for (const auto& [name, p] : plain.named_parameters())
      EXPECT_TRUE(testutil::bitwise_equal(p, testutil::parameter(wrapped, name))) << name << " checkpointed " << checkpointed;
    for (const BucketTiming& t : ddp.last_timeline().buckets) EXPECT_LE(t.launched, t.finished);
  }
}

TEST(DistributedDataParallel, NoSyncAccumulatesAndTheNextBackwardReducesTheSum) {
  auto group = single_process_group();
  testutil::GlobalBatch batch = testutil::global_batch();
  manual_seed(7);
  testutil::SmallNet plain(16, false), wrapped(16, false);
  wrapped.load_state_dict(plain.state_dict());
  DistributedDataParallel ddp(wrapped, group);
  Tensor a = batch.x.narrow(0, 0, 64), b = batch.x.narrow(0, 64, 64);
  Tensor ya = batch.y.narrow(0, 0, 64), yb = batch.y.narrow(0, 64, 64);
  cross_entropy(plain(a), ya).backward();
  cross_entropy(plain(b), yb).backward();
  {
    auto local = ddp.no_sync();
    cross_entropy(ddp(a), ya).backward();
  }
  cross_entropy(ddp(b), yb).backward();
  for (const auto& [name, p] : plain.named_parameters()) {
    // Not bitwise: DDP sums the two backwards' gradients in a different order than .grad does.
    Tensor got = testutil::parameter(wrapped, name).grad();
    EXPECT_LT(max(abs(got - p.grad())).item(), 1e-6) << name;
  }
}

TEST(DistributedDataParallel, AParameterWithoutAGradientIsAnErrorUnlessAllowed) {
  auto group = single_process_group();
  testutil::GlobalBatch batch = testutil::global_batch();
  testutil::SmallNet net(16, false);
  nn::Linear unused(3, 3);
  net.register_module("unused", unused);
  {
    DistributedDataParallel ddp(net, group);
    expect_error([&] { cross_entropy(ddp(batch.x), batch.y).backward(); },
                 "this backward computed no gradient for unused.weight, unused.bias");
    // The failed backward left DDP ready for the next one, which fails the same way.
    expect_error([&] { cross_entropy(ddp(batch.x), batch.y).backward(); }, "find_unused_parameters = true");
  }
  net.zero_grad();
  DistributedDataParallel ddp(net, group, DataParallelOptions{.find_unused_parameters = true});
  cross_entropy(ddp(batch.x), batch.y).backward();
  ASSERT_TRUE(unused.weight.grad().defined());
  EXPECT_EQ(max(abs(unused.weight.grad())).item(), 0.0);
  EXPECT_TRUE(net.fc1.weight.grad().defined());
}

TEST(DistributedDataParallel, HooksAreRemovedWithTheWrapper) {
  auto group = single_process_group();
  testutil::GlobalBatch batch = testutil::global_batch();
  testutil::SmallNet net(16, false);
  nn::Linear unused(3, 3);
  net.register_module("unused", unused);
  { DistributedDataParallel ddp(net, group); }
  // Without the wrapper's hooks, the unused parameter is no error any more.
  cross_entropy(net(batch.x), batch.y).backward();
  EXPECT_FALSE(unused.weight.grad().defined());
}
