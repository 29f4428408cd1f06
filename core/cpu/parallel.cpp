// One thread pool: OpenBLAS is linked in its OpenMP build, so its threads and ours are the same
// OpenMP team, and setting the count once sets both (docs/internals.md, "One thread pool").
#include <cblas.h>
#include <omp.h>

#include "core/check.h"
#include "core/ops.h"

namespace ember {

void set_num_threads(int n) {
  EMBER_CHECK(n >= 1, "[set_num_threads] expects a positive thread count, got ", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace ember
