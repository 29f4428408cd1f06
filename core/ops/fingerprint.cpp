#include "core/kernels.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

uint64_t fingerprint(const Tensor& x) {
  ops::check_defined(x, "fingerprint");
  const Tensor dense = x.contiguous();  // the kernels read element i at offset i
  return kernels::fingerprint[dense.device()](dense);
}

}  // namespace ember
