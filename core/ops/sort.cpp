// Sorting along a dim: sort, argsort and topk. The sort kernel finds the positions (Note [Sort
// order] in core/cpu/sort.cpp) and gather picks the values at them, so the values' gradient is
// gather's: each element of the gradient goes back to the position its value came from, and
// the indices, like every integer tensor, carry none.
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

namespace {

// The positions (int64) of the first k elements of every slice of x along dim d, in sorted order.
Tensor sorted_positions(const Tensor& x, int64_t d, int64_t k, bool descending) {
  Shape shape = x.shape();
  shape[static_cast<size_t>(d)] = k;
  Tensor indices = ops::empty_on(shape, kInt64, x.device());
  const ops::Split3 s = ops::split_at(x.shape(), d);
  if (indices.numel() > 0) kernels::sort[x.device()](x.contiguous(), s.outer, s.k, s.inner, k, descending, indices);
  return indices;
}

// The values and positions of the first k elements along dim of x sorted. A 0-d tensor sorts
// as the one element it holds (as PyTorch): the work is done on it seen as [1].
ValuesAndIndices sorted_prefix(const Tensor& x, int64_t dim, int64_t k, bool descending, const char* op) {
  const int64_t d = wrap_dim(dim, x.dim(), op);
  const Tensor x1 = x.dim() == 0 ? x.reshape({1}) : x;
  EMBER_CHECK(k >= 0 && k <= x1.size(d), "[", op, "] k = ", k, " is out of range for dim ", d, " of size ",
              x1.size(d), " (input shape ", shape_str(x.shape()), ")");
  Tensor indices = sorted_positions(x1, d, k, descending);
  Tensor values = gather(x1, d, indices);
  if (x.dim() == 0 && k == 1) return {values.reshape({}), indices.reshape({})};
  return {values, indices};
}

}  // namespace

ValuesAndIndices sort(const Tensor& x, int64_t dim, bool descending) {
  ops::check_defined(x, "sort");
  return sorted_prefix(x, dim, x.dim() == 0 ? 1 : x.size(wrap_dim(dim, x.dim(), "sort")), descending, "sort");
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  ops::check_defined(x, "argsort");
  const int64_t d = wrap_dim(dim, x.dim(), "argsort");
  if (x.dim() == 0) return zeros({}, TensorOptions(kInt64).with_device(x.device()));
  return sorted_positions(x, d, x.size(d), descending);
}

ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  ops::check_defined(x, "topk");
  ValuesAndIndices top = sorted_prefix(x, dim, k, largest, "topk");
  if (sorted || x.dim() == 0) return top;
  // In the order of their positions: the picked indices sorted, and the values taken along.
  const int64_t d = wrap_dim(dim, x.dim(), "topk");
  Tensor by_position = sorted_positions(top.indices, d, k, false);
  return {gather(top.values, d, by_position), gather(top.indices, d, by_position)};
}

}  // namespace ember
