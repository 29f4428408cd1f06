// ember::distributed on two ranks: ctest starts this binary as `mpirun -np 2` (tests/CMakeLists.txt),
// and every test runs on both ranks, each checking its own side. A failing expectation on one
// rank must not leave the other waiting in a collective, so the tests call the same collectives
// on every rank whatever they find.
#include <gtest/gtest.h>

#include "distributed/agreement.h"
#include "distributed/distributed.h"
#include "distributed_helpers.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::distributed;
using ember::testutil::expect_error;

namespace {

std::shared_ptr<ProcessGroup> world_ptr() {
  static std::shared_ptr<ProcessGroup> group = init_process_group();
  return group;
}
ProcessGroup& world() { return *world_ptr(); }

}  // namespace

TEST(Collectives, RunOnTwoRanks) {
  ProcessGroup& g = world();
  ASSERT_EQ(g.size(), 2) << "run under mpirun -np 2";
  const double r = g.rank();
  Tensor t = tensor({r + 1, 10 * (r + 1)});
  g.allreduce(t, ReduceOp::Sum);
  testutil::expect_near(t, {3, 30});
  Tensor a = tensor({r + 1, 10 * (r + 1)}, kFloat64);
  g.allreduce(a, ReduceOp::Avg);
  testutil::expect_near(a, {1.5, 15});
  Tensor b = full({2, 2}, r);
  g.broadcast(b, 1);
  testutil::expect_near(b, {1, 1, 1, 1});
  Tensor all = g.allgather(tensor({r, r}).to(kInt64));
  EXPECT_EQ(all.shape(), (Shape{2, 2}));
  testutil::expect_near(all, {0, 0, 1, 1});
  Tensor strided = arange(6, kFloat32).reshape({2, 3}).t();
  g.allreduce(strided, ReduceOp::Sum);
  testutil::expect_near(strided.contiguous(), {0, 6, 2, 8, 4, 10});
  Tensor async_sum = full({1000}, r + 1);
  std::unique_ptr<Work> work = g.allreduce_async(async_sum, ReduceOp::Avg);
  work->wait();
  EXPECT_EQ(async_sum.at({999}), 1.5);
  g.barrier();
}

// Each mismatch fails on both ranks alike, naming both ranks' tensors, and the group is still
// usable afterwards (every rank left the header exchange at the same point).
TEST(Collectives, MismatchesFailOnEveryRank) {
  ProcessGroup& g = world();
  const bool first = g.rank() == 0;
  expect_error([&] { g.allreduce(zeros({first ? 3 : 4})); },
               "[allreduce] the ranks' tensors differ: rank 0 has a float32 tensor of shape [3], rank 1 has a float32 "
               "tensor of shape [4]");
  expect_error([&] { g.allreduce(zeros({2}, first ? kFloat32 : kFloat64)); },
               "rank 0 has a float32 tensor of 1 dimension(s), rank 1 has a float64 tensor of 1 dimension(s)");
  expect_error([&] { g.allgather(first ? zeros({2, 2}) : zeros({4})); },
               "[allgather] the ranks' tensors differ: rank 0 has a float32 tensor of 2 dimension(s), rank 1 has a "
               "float32 tensor of 1 dimension(s)");
  expect_error([&] { g.broadcast(zeros({2}), first ? 0 : 1); }, "rank 0 root 0, rank 1 root 1");
  expect_error([&] {
    if (first) g.allreduce(zeros({2}));
    else g.broadcast(zeros({2}), 0);
  }, "the ranks call different collectives: rank 0 allreduce, rank 1 broadcast");
  Tensor t = ones({2});
  g.allreduce(t);
  testutil::expect_near(t, {2, 2});
}

namespace {

// Trains `steps` SGD steps with DDP on this rank's half of the global batch and, on every rank,
// the same model without DDP on the whole batch; the two must agree within float32 rounding,
// and the DDP replicas must agree bitwise.
void expect_ddp_matches_one_process(bool checkpointed, size_t bucket_cap_bytes) {
  ProcessGroup& g = world();
  testutil::GlobalBatch batch = testutil::global_batch();
  manual_seed(100 + static_cast<uint64_t>(g.rank()));  // different on each rank: DDP must broadcast rank 0's
  testutil::SmallNet replica(32, checkpointed);
  DistributedDataParallel ddp(replica, world_ptr(), DataParallelOptions{.bucket_cap_bytes = bucket_cap_bytes});
  testutil::SmallNet single(32, checkpointed);
  single.load_state_dict(replica.state_dict());  // rank 0's initial values, on every rank

  const int64_t half = batch.x.size(0) / 2;
  testutil::sgd_steps(replica, ddp, batch.x.narrow(0, g.rank() * half, half), batch.y.narrow(0, g.rank() * half, half), 5);
  testutil::sgd_steps(single, single, batch.x, batch.y, 5);

  for (const auto& [name, p] : single.named_parameters()) {
    Tensor mine = testutil::parameter(replica, name);
    // float32 rounding: the two sum the per-example gradients in different orders.
    EXPECT_LT(testutil::max_abs_difference(mine, p), 2e-5) << name;
    Tensor both = g.allgather(mine.detach());
    EXPECT_TRUE(testutil::bitwise_equal(both.select(0, 0), both.select(0, 1))) << name << " differs between the ranks";
  }
}

}  // namespace

TEST(DistributedDataParallel, TwoRanksAtBatch64StepLikeOneAtBatch128) {
  expect_ddp_matches_one_process(false, kDefaultBucketCapBytes);
}

TEST(DistributedDataParallel, ManySmallBucketsGiveTheSameResult) { expect_ddp_matches_one_process(false, 1024); }

TEST(DistributedDataParallel, CheckpointedBlocksGiveTheSameResult) { expect_ddp_matches_one_process(true, 1024); }

TEST(DistributedDataParallel, DifferentModelsAreRejectedOnEveryRank) {
  const bool first = world().rank() == 0;
  testutil::SmallNet net(first ? 16 : 8, false);
  expect_error([&] { DistributedDataParallel ddp(net, world_ptr()); },
               "[DistributedDataParallel] parameter 'fc1.weight' is float32 [16, 8] on rank 0 but float32 [8, 8] on "
               "rank 1; every rank must wrap the same model");
  testutil::SmallNet small(16, false);
  nn::Linear extra(2, 2);
  if (!first) small.register_module("extra", extra);
  expect_error([&] { DistributedDataParallel ddp(small, world_ptr()); },
               "the number of parameters that require grad is 6 on rank 0 but 8 on rank 1");
  // The same shapes under other names: the state dicts would not line up either.
  struct Renamed : nn::Module {
    nn::Linear layer{2, 2};
    explicit Renamed(const char* name) { register_module(name, layer); }
  };
  Renamed renamed(first ? "encoder" : "decoder");
  expect_error([&] { DistributedDataParallel ddp(renamed, world_ptr()); },
               "the ranks differ: parameter 'encoder.weight' = float32 [2, 2] on rank 0 but parameter "
               "'decoder.weight' = float32 [2, 2] on rank 1");
  nn::Linear wide(2, 2), wide64(2, 2);
  wide64.to(kFloat64);
  expect_error([&] { DistributedDataParallel ddp(first ? wide : wide64, world_ptr()); },
               "parameter 'weight' is float32 [2, 2] on rank 0 but float64 [2, 2] on rank 1");
}

// Note [Ranks that must agree]: every rank throws the same Error, naming the first setting that
// differs; the group goes on working afterwards.
TEST(Agreement, TheFirstDifferenceIsNamedOnEveryRank) {
  ProcessGroup& g = world();
  const bool first = g.rank() == 0;
  const std::vector<std::string> texts = allgather_text(g, first ? "short" : std::string(3000, 'x'));
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[0], "short");
  EXPECT_EQ(texts[1], std::string(3000, 'x'));
  check_ranks_agree(g, {{"--lr", "0.05"}, {"--seed", "1"}}, "[test]", "advice");
  expect_error([&] { check_ranks_agree(g, {{"--lr", "0.05"}, {"--seed", first ? "1" : "2"}}, "[test]", "advice"); },
               "[test] --seed is 1 on rank 0 but 2 on rank 1; advice");
  expect_error([&] {
    Settings mine{{"--lr", "0.05"}};
    if (first) mine.emplace_back("--epochs", "3");
    check_ranks_agree(g, mine, "[test]", "advice");
  }, "[test] the ranks differ: --epochs = 3 on rank 0 but nothing on rank 1; advice");
  Tensor t = ones({2});
  g.allreduce(t);
  testutil::expect_near(t, {2, 2});
}

// Rank 1 uses a branch rank 0 does not: with find_unused_parameters, rank 0 contributes zeros
// and both ranks end with half of rank 1's gradient there.
TEST(DistributedDataParallel, FindUnusedParametersAveragesWithZeros) {
  ProcessGroup& g = world();
  struct Branchy : nn::Module {
    nn::Linear trunk{4, 4}, branch{4, 4};
    bool use_branch = false;
    Branchy() {
      register_module("trunk", trunk);
      register_module("branch", branch);
    }
    Tensor forward(const Tensor& x) override { return use_branch ? branch(trunk(x)) : trunk(x); }
  };
  Branchy net;
  net.use_branch = g.rank() == 1;
  DistributedDataParallel ddp(net, world_ptr(), DataParallelOptions{.find_unused_parameters = true});
  Tensor x = ones({2, 4});
  ddp(x).sum().backward();
  Tensor local = ones({4, 4}) * 0.0;
  if (g.rank() == 1) {
    // Rank 1's own gradient of branch.weight, computed without DDP.
    Tensor w = net.branch.weight.detach().requires_grad_();
    (matmul(net.trunk(x).detach(), w.t()) + net.branch.bias.detach()).sum().backward();
    local = w.grad();
  }
  g.broadcast(local, 1);
  EXPECT_LT(testutil::max_abs_difference(net.branch.weight.grad(), local * 0.5), 1e-6);
}
