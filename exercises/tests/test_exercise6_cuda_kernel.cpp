// Exercise 6 (exercises/README.md): the launch shape of a grid-stride loop, on the CPU in every
// build, and the axpy kernel against ember's own ops in a CUDA build with a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/generator.h"
#include "core/ops.h"
#include "ex6_cuda_kernel.h"
#include "test_helpers.h"
#ifdef EMBER_WITH_CUDA
#include "cuda/context.h"
#endif

using namespace ember;
using exercises::launch_shape;
using exercises::LaunchShape;

// The shape the README's examples promise.
TEST(Exercise6LaunchShape, Examples) {
  EXPECT_EQ(launch_shape(0, 256, 65535), (LaunchShape{0, 256}));
  EXPECT_EQ(launch_shape(1, 256, 65535), (LaunchShape{1, 256}));
  EXPECT_EQ(launch_shape(256, 256, 65535), (LaunchShape{1, 256}));
  EXPECT_EQ(launch_shape(257, 256, 65535), (LaunchShape{2, 256}));
  EXPECT_EQ(launch_shape(1000, 128, 4), (LaunchShape{4, 128}));
}

// Without overflow: (n + t - 1) / t would wrap for these.
TEST(Exercise6LaunchShape, HugeCountsAreCapped) {
  const int64_t top = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(launch_shape(top, 256, 65535), (LaunchShape{65535, 256}));
  EXPECT_EQ(launch_shape(top - 100, 1024, top), (LaunchShape{top / 1024 + 1, 1024}));
}

// For every n and block size below, the grid is the smallest that covers n (or the cap), and
// the grid-stride loop run on the host visits each element exactly once.
TEST(Exercise6LaunchShape, TheGridStrideLoopCoversEveryElementOnce) {
  for (int64_t threads : {32, 64, 256, 1024})
    for (int64_t max_blocks : {1, 3, 65535})
      for (int64_t n : {0, 1, 31, 32, 33, 1000, 4097, 20000}) {
        SCOPED_TRACE(testing::Message() << "n " << n << ", threads " << threads << ", max_blocks " << max_blocks);
        const LaunchShape shape = launch_shape(n, threads, max_blocks);
        ASSERT_EQ(shape.threads_per_block, threads);
        ASSERT_GE(shape.blocks, 0);
        ASSERT_LE(shape.blocks, max_blocks);
        if (shape.blocks < max_blocks) {
          EXPECT_GE(shape.blocks * threads, n) << "too few threads";
          EXPECT_LT((shape.blocks - 1) * threads, n) << "a block with nothing to do";
        }
        std::vector<int> visits(static_cast<size_t>(n), 0);
        const int64_t grid = shape.blocks * threads;
        for (int64_t thread = 0; thread < grid; ++thread)
          for (int64_t i = thread; i < n; i += grid) ++visits[static_cast<size_t>(i)];
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[static_cast<size_t>(i)], 1) << "element " << i;
      }
}

TEST(Exercise6LaunchShape, RejectsWhatCudaCannotLaunch) {
  testutil::expect_error([] { launch_shape(-1, 256, 65535); }, "[launch_shape] expects an element count >= 0, got -1");
  for (int64_t threads : {0, 48, 2048})
    testutil::expect_error([&] { launch_shape(10, threads, 65535); },
                           "[launch_shape] threads_per_block must be a multiple of 32 in [32, 1024], got " +
                               std::to_string(threads));
  testutil::expect_error([] { launch_shape(10, 256, 0); }, "[launch_shape] max_blocks must be >= 1, got 0");
}

#ifdef EMBER_WITH_CUDA
// ember's float32 x * alpha + y rounds twice; the GPU may fuse the multiply-add and round once,
// so the two agree to a float32 ulp or so, not bitwise.
TEST(Exercise6Axpy, MatchesEmbersOpsOnTheCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  manual_seed(6);
  // The last size needs more than 65535 blocks of 256 threads: the grid-stride loop goes round.
  for (int64_t n : {0, 1, 1000, 65535 * 256 + 3}) {
    SCOPED_TRACE(n);
    const Tensor x = randn({n}), y = randn({n});
    const Tensor got = exercises::axpy_cuda(-1.5, x.to(kCUDA), y.to(kCUDA));
    ASSERT_TRUE(got.device().is_cuda());
    ASSERT_EQ(got.shape(), x.shape());
    if (n == 0) continue;
    const Tensor want = x * -1.5 + y;
    EXPECT_LE(max(abs(got.cpu() - want) / (abs(want) + 1.0)).item<double>(), 1e-6);
  }
}

TEST(Exercise6Axpy, RejectsTensorsOffTheGpu) {
  testutil::expect_error([] { exercises::axpy_cuda(1.0, zeros({3}), zeros({3})); },
                         "[axpy_cuda] expects x and y on one CUDA device, got cpu and cpu");
}

TEST(Exercise6Axpy, RejectsOtherDtypesAndShapes) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testutil::expect_error([] { exercises::axpy_cuda(1.0, zeros({3}, kFloat64).to(kCUDA), zeros({3}, kFloat64).to(kCUDA)); },
                         "[axpy_cuda] expects float32 tensors, got float64 and float64");
  testutil::expect_error([] { exercises::axpy_cuda(1.0, zeros({3}).to(kCUDA), zeros({4}).to(kCUDA)); },
                         "[axpy_cuda] expects one shape, got [3] and [4]");
}
#endif
