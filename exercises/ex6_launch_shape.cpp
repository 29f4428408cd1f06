// Exercise 6 (a): the launch shape of a grid-stride loop. Read exercises/README.md (exercise 6)
// first.
#include "ex6_cuda_kernel.h"
#include "not_implemented.h"

namespace ember::exercises {

LaunchShape launch_shape(int64_t n, int64_t threads_per_block, int64_t max_blocks) {
  (void)n;
  (void)threads_per_block;
  (void)max_blocks;
  not_implemented(6);
}

}  // namespace ember::exercises
