#pragma once
// A limit on a device's allocator (Note [Memory limits] in core/memory_limit.h) refuses a fresh
// block past it with the facts of the request, and leaves nothing of it behind: the check that
// test_memory_limit runs on the CPU and test_cuda on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/allocator.h"
#include "core/memory_limit.h"
#include "core/ops.h"
#include "core/out_of_memory.h"

namespace ember::testutil {

inline void expect_fresh_blocks_fail_past_the_limit(Device device) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  const auto three_mebibytes = [device] { return zeros({3 * kMiB / 4}, TensorOptions(kFloat32).with_device(device)); };
  memory::empty_cache(device);
  const int64_t before = memory::stats(device).live_bytes;
  memory::set_limit(device, before + 5 * kMiB);
  Tensor a = three_mebibytes();
  try {
    const Tensor b = three_mebibytes();
    ADD_FAILURE() << "a second 3 MiB fitted under a limit 5 MiB above what was live";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.facts().device, device);
    EXPECT_EQ(e.facts().requested_bytes, 3 * kMiB);
    EXPECT_EQ(e.facts().limit_bytes, before + 5 * kMiB);
    EXPECT_EQ(e.facts().live_bytes, before + 3 * kMiB);
    EXPECT_EQ(e.facts().reserved_bytes, memory::stats(device).reserved_bytes);
    const std::string expected =
        "[allocator] out of memory on " + device.str() + ": a tensor of 3.00 MiB (3145728 bytes) does not fit";
    EXPECT_NE(e.message().find(expected), std::string::npos) << e.message();
  }
  // Nothing of the failed request is left: the live bytes are those of `a`.
  EXPECT_EQ(memory::stats(device).live_bytes, before + 3 * kMiB);
  a = Tensor();
  const Tensor c = three_mebibytes();  // the cached block: it fits now
  EXPECT_EQ(memory::stats(device).live_bytes, before + 3 * kMiB);
  memory::clear_limit(device);
}

}  // namespace ember::testutil
