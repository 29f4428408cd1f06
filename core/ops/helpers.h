#pragma once
// Small helpers shared by the op files: argument checks that name the op, and "allocate the
// output, call the kernel" for the elementwise families.
#include "core/check.h"
#include "core/kernels.h"
#include "core/tensor.h"

namespace ember::ops {

inline void check_defined(const Tensor& t, const char* op, const char* what = "input") {
  EMBER_CHECK(t.defined(), "[", op, "] ", what, " is an undefined tensor");
}

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  EMBER_CHECK(a.device() == b.device(), "[", op, "] expected tensors on one device, got ", a.device(), " (shape ",
              shape_str(a.shape()), ") and ", b.device(), " (shape ", shape_str(b.shape()), ")");
}

// A value written into a tensor of `dtype` and `shape` (a fill, a mask's value, a pad) must be
// one that the dtype it converts through holds (holds_value), as PyTorch checks: a saturating
// conversion would write INT64_MAX for 1e300, or 0 for NaN, and a 16-bit float inf for 70000,
// silently. That dtype is the tensor's, except in full of a 16-bit float, which converts through
// float32 as PyTorch's full does (70000 fills float16 with inf there, checked against 2.15),
// while fill_, masked_fill and pad refuse it.
inline void check_fill_value(double value, DType dtype, const Shape& shape, const char* op, DType through) {
  EMBER_CHECK(holds_value(through, value), "[", op, "] value ", value, " cannot be converted to ", dtype,
              " without overflow (", dtype, " tensor of shape ", shape_str(shape), ")");
}
inline void check_fill_value(double value, DType dtype, const Shape& shape, const char* op) {
  check_fill_value(value, dtype, shape, op, dtype);
}

inline void check_floating(const Tensor& t, const char* op) {
  EMBER_CHECK(is_floating(t.dtype()), "[", op, "] expects a floating point tensor, got ", t.dtype(), " of shape ",
              shape_str(t.shape()));
}

// Whether a tensor of shape `from` broadcasts to `to` without changing `to` (a mask to the tensor
// it masks): aligned from the right, each dim of `from` is 1 or equal to that of `to`.
inline bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  return true;
}

// A tensor seen as [outer, k, inner] around dim d, the layout of the kernels that work along one
// dim (index_select, gather, sort, cumsum).
struct Split3 {
  int64_t outer = 1, k = 1, inner = 1;
};
inline Split3 split_at(const Shape& shape, int64_t d) {
  Split3 s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    const int64_t n = shape[static_cast<size_t>(i)];
    (i < d ? s.outer : i == d ? s.k : s.inner) *= n;
  }
  return s;
}

// Reduction dims (core/ops/reduce.cpp): `dims` wrapped, sorted and de-duplicated (empty means every
// dim; a dim named twice is an error naming `op`), and the shape a reduction over them leaves with
// keepdim (reduced dims 1) and without (reduced dims gone).
Shape normalize_dims(const Shape& dims, int64_t ndim, const char* op);
Shape keepdim_shape(const Shape& shape, const Shape& dims);
Shape squeezed_shape(const Shape& shape, const Shape& dims);

inline Tensor empty_on(const Shape& shape, DType dtype, Device device) {
  return empty(shape, TensorOptions(dtype).with_device(device));
}

// out = op(x, a, b) in a new contiguous tensor.
inline Tensor unary_kernel(kernels::UnaryOp op, const Tensor& x, double a = 0, double b = 0) {
  Tensor out = empty_on(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) kernels::unary[x.device()](op, x, out, a, b);
  return out;
}

// Strides that let `new_shape` view memory laid out as (shape, strides), if any exist (what
// view() needs; reshape() copies when there are none).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape);

// The gradient of a softmax (or, per spec, log_softmax) along `dim` from its output y and the
// output's gradient g, through the fused softmax_backward kernel. With overwrite_g (a backward
// formula's autograd::gradient_is_reusable(g)) the result goes over g's buffer when the rows are
// g's own (dim is the last, g of y's shape and dtype): the kernels read a row's g element before
// they write that element.
Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, const kernels::SoftmaxSpec& spec,
                        bool overwrite_g = false);

// Broadcasts, promotes dtypes and runs a binary kernel into a new tensor.
Tensor binary_kernel(kernels::BinaryOp op, const Tensor& a, const Tensor& b, const char* name);

// A 0-d tensor holding `value` with x's dtype and device (Python-number semantics: it never
// widens x's dtype; callers convert x first when the number is one x cannot hold). scalar_tensor
// does not check the value: a number in an expression converts as PyTorch converts it there
// (1e300 in a float16 sum is inf); a value written into a tensor is checked by its op
// (check_fill_value).
inline Tensor wrap_scalar(double value, const Tensor& x) {
  return scalar_tensor(value, TensorOptions(x.dtype()).with_device(x.device()));
}

// The value wrap_scalar(value, x) holds: a 16-bit float rounds it (through float32, as PyTorch's
// conversion), an integer converts it by Note [Float to integer conversion]. For kernels that take
// the number itself and compare in a wider type (clamp's gradient mask computes a bfloat16 x in
// float32, yet PyTorch compares it with the bound rounded to bfloat16).
inline double stored_value(DType dtype, double value) {
  return dispatch_any(dtype, [value]<class T>() { return convert<double>(convert<T>(value)); });
}

}  // namespace ember::ops
