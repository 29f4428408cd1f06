#pragma once
// Softmax and log_softmax over rows, forward and backward: their signatures and slots in the
// kernel table (Note [The kernel table] in core/kernel_table.h), and the spec of a row.
#include <cstdint>

#include "core/kernel_bodies/host_device.h"
#include "core/kernel_table.h"

namespace ember::kernels {

// What a softmax row is: softmax (or log_softmax) of scale * x over the row's visible columns.
// With causal_rows > 0 the rows are those of [causal_rows, cols] matrices, and row i of each
// (i = row % causal_rows) sees columns j <= i only, the lower triangle from the top-left corner as
// tril(ones(L, S)) keeps it; the others are masked: 0 in a softmax's output (-inf in a
// log_softmax's) and 0 in the gradient (Note [Scaled causal softmax] in core/ops/attention.cpp).
struct SoftmaxSpec {
  bool log = false;
  double scale = 1.0;
  int64_t causal_rows = 0;
  // A row whose visible values are all -inf gives the masked value everywhere (0 in a softmax)
  // instead of NaN: attention's queries that may attend to nothing (Note [Rows that attend to
  // nothing] in core/ops/attention.cpp). Its gradient is then 0 through the usual formula.
  bool empty_rows_masked = false;
  // The columns row r sees: a prefix of the row.
  EMBER_HOST_DEVICE int64_t visible(int64_t r, int64_t cols) const {
    if (causal_rows <= 0) return cols;
    const int64_t i = r % causal_rows + 1;
    return i < cols ? i : cols;
  }
};
// x contiguous [rows, cols]; out = the rows' softmax as `spec` says
using SoftmaxFn = void(const Tensor& x, const Tensor& out, const SoftmaxSpec& spec);
// y = what SoftmaxFn wrote for the same spec, g its gradient, both contiguous [rows, cols]; on
// each row's visible columns gx = scale * y * (g - sum(g * y)), for log_softmax
// gx = scale * (g - exp(y) * sum(g)); 0 on the masked ones
using SoftmaxBackwardFn = void(const Tensor& y, const Tensor& g, const Tensor& gx, const SoftmaxSpec& spec);

inline Kernel<SoftmaxFn> softmax{"softmax", Writes{1}};
inline Kernel<SoftmaxBackwardFn> softmax_backward{"softmax_backward", Writes{2}};

}  // namespace ember::kernels
