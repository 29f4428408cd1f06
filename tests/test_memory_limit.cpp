// Memory limits (Note [Memory limits] in core/memory_limit.h): enforced on the CPU's fresh blocks,
// the cache given back before a request fails, the OutOfMemoryError's facts, the process going on
// after it, bad limits refused by name, and EMBER_MEMORY_LIMIT (the ctest runs of
// test_memory_limit_env_*; CUDA's limit is in test_cuda).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/memory_limit.h"
#include "core/ops.h"
#include "core/out_of_memory.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "optim/adam.h"
#include "test_helpers.h"
#include "tests/memory_limit_check.h"
#include "tests/two_layers.h"
#include "utils/checkpoint.h"

using namespace ember;
using testutil::expect_error;
using testutil::TwoLayers;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// A float32 tensor of `mib` MiB.
Tensor mebibytes(int64_t mib) { return zeros({mib * kMiB / 4}); }

// Sets a limit of `extra` bytes above what is live, with an empty cache, and clears it at the end.
struct LimitAboveLive {
  explicit LimitAboveLive(int64_t extra) {
    memory::empty_cache();
    memory::set_limit(kCPU, memory::stats().live_bytes + extra);
  }
  ~LimitAboveLive() { memory::clear_limit(kCPU); }
};

// test_cuda runs the same on a GPU.
TEST(MemoryLimit, FreshBlocksPastTheLimitFailWithTheFacts) { testutil::expect_fresh_blocks_fail_past_the_limit(kCPU); }

TEST(MemoryLimit, IsAnEmberErrorToo) {
  LimitAboveLive guard(kMiB);
  expect_error([] { mebibytes(2); }, "does not fit under the limit of");
}

TEST(MemoryLimit, TheCacheIsGivenBackBeforeARequestFails) {
  LimitAboveLive guard(8 * kMiB);
  { Tensor cached = mebibytes(5); }  // its block goes to the cache: 5 MiB held, none live
  const int64_t reserved = memory::stats().reserved_bytes;
  Tensor bigger = mebibytes(6);  // the 5 MiB block cannot serve it, and 5 + 6 > 8: the cache goes
  EXPECT_LT(memory::stats().reserved_bytes, reserved + 6 * kMiB);
}

TEST(MemoryLimit, RequestsTheCacheServesNeverFail) {
  LimitAboveLive guard(4 * kMiB);
  { Tensor a = mebibytes(4); }
  for (int i = 0; i < 3; ++i) Tensor again = mebibytes(4);  // the same block each time, at the limit
}

TEST(MemoryLimit, ATrainingLoopGoesOnAfterTheErrorWithASmallerBatch) {
  const MemoryStats start = memory::stats();
  LimitAboveLive guard(16 * kMiB);
  const Tensor w = randn({256, 256}).requires_grad_();
  auto step = [&](int64_t batch) {
    const Tensor x = randn({batch, 256});
    sum(relu(matmul(x, w))).backward();
    w.grad().zero_();
  };
  EXPECT_THROW(step(16384), OutOfMemoryError);  // 16 MiB activations alone
  step(256);
  step(256);
  EXPECT_EQ(memory::stats().live_bytes, start.live_bytes + static_cast<int64_t>(w.nbytes() + w.grad().nbytes()));
}

// The facts of the error that `fn` throws under a limit of `extra` bytes above what is live now.
OutOfMemoryError::Facts facts_of_failure(int64_t extra, const std::function<void()>& fn) {
  LimitAboveLive guard(extra);
  try {
    fn();
  } catch (const OutOfMemoryError& e) {
    return e.facts();
  }
  ADD_FAILURE() << "nothing failed under a limit of " << extra << " bytes above what was live";
  return {};
}

TEST(MemoryLimit, TheErrorSaysWhereTheRequestCameFrom) {
  TwoLayers net;
  const Tensor x = randn({256, 64});
  // The forward: fc1's and the relu's 64 KiB fit, fc2's 4 MiB output does not.
  OutOfMemoryError::Facts f = facts_of_failure(kMiB, [&] { net(x); });
  EXPECT_EQ(f.phase, "forward");
  EXPECT_EQ(f.module, "fc2");
  EXPECT_EQ(f.op, "matmul");  // Linear runs the matmul op with its bias
  EXPECT_EQ(f.requested_bytes, 4 * kMiB);

  // The backward: exp's gradient, g * exp(x), needs a tensor of x's 1 MiB; the op that asks is the
  // innermost one running, the mul that exp's backward runs.
  const Tensor big = randn({kMiB / 4}).requires_grad_();
  Tensor loss = sum(exp(big));
  f = facts_of_failure(kMiB / 2, [&] { loss.backward(); });
  EXPECT_EQ(f.phase, "backward");
  EXPECT_EQ(f.op, "mul");
  EXPECT_EQ(f.module, "");

  // The recompute of a checkpointed region, the first thing its backward allocates.
  loss = sum(utils::checkpoint([](const Tensor& t) { return exp(exp(t)); }, big));
  f = facts_of_failure(kMiB / 2, [&] { loss.backward(); });
  EXPECT_EQ(f.phase, "recompute of a checkpointed region");
  EXPECT_EQ(f.op, "exp");

  // The optimizer's step: Adam's first step makes its two state tensors.
  loss = sum(exp(big));
  loss.backward();
  optim::Adam adam({big}, optim::AdamOptions(1e-3));
  f = facts_of_failure(kMiB / 2, [&] { adam.step(); });
  EXPECT_EQ(f.phase, "optimizer step");

  // Data loading: a batch of 4 MiB.
  auto data = std::make_shared<data::TensorDataset>(randn({8, kMiB / 4}), zeros({8}, kInt64));
  data::DataLoader loader(data, data::DataLoaderOptions().batch_size(4));
  f = facts_of_failure(kMiB, [&] { loader.begin(); });
  EXPECT_EQ(f.phase, "data loading");
}

TEST(MemoryLimit, LimitReadsBackAndClears) {
  memory::set_limit(kCPU, memory::stats().live_bytes + 123 * kMiB);
  EXPECT_EQ(memory::limit(kCPU), memory::stats().live_bytes + 123 * kMiB);
  memory::set_limit_fraction(kCPU, 0.5);
  EXPECT_EQ(memory::limit(kCPU),
            static_cast<int64_t>(std::floor(0.5 * static_cast<double>(memory::device_memory_bytes(kCPU)))));
  memory::clear_limit(kCPU);
  EXPECT_FALSE(memory::limit(kCPU).has_value());
}

TEST(MemoryLimit, BadLimitsAreRefusedByName) {
  expect_error([] { memory::set_limit(kCPU, 0); }, "[memory::set_limit] the limit on cpu must be positive, got 0");
  expect_error([] { memory::set_limit(kCPU, -5); }, "must be positive, got -5");
  const Tensor held = mebibytes(2);
  expect_error([] { memory::set_limit(kCPU, kMiB); }, "[memory::set_limit] 1.00 MiB on cpu is below the");
  for (double f : {0.0, -0.5, 1.5, std::nan("")})
    expect_error([f] { memory::set_limit_fraction(kCPU, f); }, "[memory::set_limit_fraction] the fraction of cpu");
  expect_error([] { memory::set_limit(Device(DeviceType::CPU, 99), kMiB); }, "device indices 0 to 63");
  EXPECT_FALSE(memory::limit(kCPU).has_value());  // none of those set one
}

TEST(MemoryLimit, SizesParseAsTheNoteSays) {
  EXPECT_EQ(memory::parse_bytes("2GiB", 0, "t"), int64_t{2} << 30);
  EXPECT_EQ(memory::parse_bytes("1.5 GB", 0, "t"), 1500000000);
  EXPECT_EQ(memory::parse_bytes("123", 0, "t"), 123);
  EXPECT_EQ(memory::parse_bytes("512KiB", 0, "t"), 512 * 1024);
  EXPECT_EQ(memory::parse_bytes("50%", 1000, "t"), 500);
  for (const char* bad : {"", "abc", "10XB", "GiB", "-1GiB", "0", "0.1B", "1e30"})
    expect_error([bad] { memory::parse_bytes(bad, 1000, "size"); }, "[size] '");
  expect_error([] { memory::parse_bytes("50%", 0, "size"); }, "a percentage of what?");
}

// Run by ctest with EMBER_MEMORY_LIMIT set (tests/CMakeLists.txt): cpu:96MiB, or a bad value.
TEST(MemoryLimitEnvironment, SetsTheLimitOrFailsByName) {
  const char* value = std::getenv("EMBER_MEMORY_LIMIT");
  if (value == nullptr) GTEST_SKIP() << "EMBER_MEMORY_LIMIT is not set";
  if (std::string(value) == "cpu:96MiB") {
    EXPECT_EQ(memory::limit(kCPU), 96 * kMiB);
    EXPECT_THROW(mebibytes(100), OutOfMemoryError);
    return;
  }
  expect_error([] { mebibytes(1); }, "[EMBER_MEMORY_LIMIT");
  expect_error([] { mebibytes(1); }, "[EMBER_MEMORY_LIMIT");  // every fresh block, until the program decides
  memory::clear_limit(kCPU);
  Tensor fine = mebibytes(1);
  EXPECT_EQ(fine.numel(), kMiB / 4);
}

}  // namespace

// What ember holds outside the allocator's blocks (CUDA's pinned staging buffers) counts against
// the limit; a private allocator of the CPU, so that the process's own keeps its statistics.
TEST(MemoryLimit, BytesHeldOutsideTheBlocksCountAgainstTheLimit) {
  struct Plain final : Allocator {
    Plain() : Allocator(kCPU) {}
    ~Plain() override { release_cache_locked(); }
    void* system_alloc(size_t nbytes) override { return std::malloc(nbytes); }
    void system_free(void* ptr) override { std::free(ptr); }
  } allocator;
  const int64_t limit = memory::stats().live_bytes + 4 * kMiB;
  memory::set_limit(kCPU, limit);
  void* block = allocator.allocate(kMiB);
  allocator.deallocate(block, kMiB);  // cached: 1 MiB reserved, none live
  EXPECT_TRUE(allocator.hold_outside_blocks(static_cast<size_t>(limit - 2 * kMiB)));
  EXPECT_EQ(allocator.stats().reserved_bytes, limit - kMiB);
  EXPECT_TRUE(allocator.hold_outside_blocks(2 * kMiB));  // the cache goes to make room
  EXPECT_EQ(allocator.stats().reserved_bytes, limit);
  EXPECT_FALSE(allocator.hold_outside_blocks(1));
  EXPECT_EQ(allocator.stats().reserved_bytes, limit);
  expect_error([&] { allocator.allocate(512); }, "does not fit under the limit");
  memory::clear_limit(kCPU);
}
