// Exercise 6 (a), the reference solution.
#include "ex6_cuda_kernel.h"

#include <algorithm>

namespace ember::exercises {

// ceil(n / t) written as n / t + (n % t != 0): the usual (n + t - 1) / t overflows int64 for n
// near INT64_MAX.
LaunchShape launch_shape(int64_t n, int64_t threads_per_block, int64_t max_blocks) {
  EMBER_CHECK(n >= 0, "[launch_shape] expects an element count >= 0, got ", n);
  EMBER_CHECK(threads_per_block >= 32 && threads_per_block <= 1024 && threads_per_block % 32 == 0,
              "[launch_shape] threads_per_block must be a multiple of 32 in [32, 1024], got ", threads_per_block);
  EMBER_CHECK(max_blocks >= 1, "[launch_shape] max_blocks must be >= 1, got ", max_blocks);
  const int64_t needed = n / threads_per_block + (n % threads_per_block != 0);
  return {std::min(needed, max_blocks), threads_per_block};
}

}  // namespace ember::exercises
