#include "core/shape.h"

#include <algorithm>

#include "core/check.h"

namespace ember {

std::optional<int64_t> try_mul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> try_add(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

int64_t checked_mul(int64_t a, int64_t b, const char* op, const Shape& shape) {
  const std::optional<int64_t> out = try_mul(a, b);
  EMBER_CHECK(out.has_value(), "[", op, "] shape ", shape_str(shape), " is too large: ", a, " * ", b,
              " overflows int64");
  return *out;
}

std::optional<int64_t> try_numel(const Shape& shape) {
  int64_t n = 1, bound = 1;  // bound: the product of the dims counted as at least 1
  for (int64_t d : shape) {
    const std::optional<int64_t> next = d < 0 ? std::nullopt : try_mul(bound, std::max<int64_t>(d, 1));
    if (!next) return std::nullopt;
    bound = *next;
    n *= d;  // cannot overflow: n <= bound
  }
  return n;
}

int64_t numel_of(const Shape& shape, const char* op) {
  for (int64_t d : shape) EMBER_CHECK(d >= 0, "[", op, "] negative dimension ", d, " in shape ", shape_str(shape));
  const std::optional<int64_t> n = try_numel(shape);
  EMBER_CHECK(n.has_value(), "[", op, "] shape ", shape_str(shape),
              " is too large: the product of its dims overflows int64");
  return *n;
}

Shape contiguous_strides(const Shape& shape, const char* op) {
  numel_of(shape, op);  // validates: every stride below is at most the bound it checked
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = -std::max<int64_t>(ndim, 1), hi = std::max<int64_t>(ndim, 1) - 1;
  EMBER_CHECK(dim >= lo && dim <= hi, "[", op, "] dim ", dim, " is out of range for a tensor with ",
              ndim, " dim(s) (expected a dim in [", lo, ", ", hi, "])");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", shape_str(a), " and ",
                shape_str(b), " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  numel_of(out, op);  // two valid shapes can broadcast to one whose size overflows
  return out;
}

}  // namespace ember
