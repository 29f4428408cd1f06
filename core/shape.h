#pragma once
// Shapes and strides are small vectors of int64; the helpers here are the arithmetic every
// op needs: element counts, contiguous strides, dim wrapping and NumPy broadcasting.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"

// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// The broadcast of two shapes (NumPy rules); throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

struct ShapePrinter { const Shape& s; };
inline std::ostream& operator<<(std::ostream& os, ShapePrinter p) { return os << shape_str(p.s); }

}  // namespace ember
