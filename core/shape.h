#pragma once
// Shapes and strides are small vectors of int64; the helpers here are the arithmetic every
// op needs: element counts, contiguous strides, dim wrapping and NumPy broadcasting.
//
// Note [Checked size arithmetic]
// Sizes, strides, byte counts and window extents are products and sums of numbers a user chose.
// A signed overflow is undefined behaviour in C++, and in practice it wraps to a small or
// negative size: a tensor gets a tiny buffer and a kernel writes far past it. So every such
// product or sum goes through try_mul/try_add (or checked_mul, which throws), and an overflow
// is an ember::Error that names the op and the real operands, never the wrapped result.
// A shape is valid when no dim is negative and the product of its dims, each counted as at
// least 1, fits in int64. That product bounds numel and every contiguous stride, so a shape
// like [0, 2^40, 2^40] is rejected although it holds no elements: its strides would overflow.
// Only new shapes and user-supplied numbers need these checks: once a tensor exists, products of
// its dims (numel, the outer/inner sizes of a reduction) fit, and ops multiply them plainly.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;

// a * b and a + b, or nullopt when the exact result does not fit in int64.
std::optional<int64_t> try_mul(int64_t a, int64_t b);
std::optional<int64_t> try_add(int64_t a, int64_t b);
// a * b; throws naming `op` and `shape` (the shape being sized) when it overflows.
int64_t checked_mul(int64_t a, int64_t b, const char* op, const Shape& shape);

// The number of elements, or nullopt when the shape is invalid (see the Note above).
std::optional<int64_t> try_numel(const Shape& shape);
// Both throw naming `op` and the shape when it is invalid.
int64_t numel_of(const Shape& shape, const char* op = "numel");
Shape contiguous_strides(const Shape& shape, const char* op = "contiguous_strides");
std::string shape_str(const Shape& shape);  // "[2, 3]"

// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// The broadcast of two shapes (NumPy rules); throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

struct ShapePrinter { const Shape& s; };
inline std::ostream& operator<<(std::ostream& os, ShapePrinter p) { return os << shape_str(p.s); }

}  // namespace ember
