#pragma once
// Note [Tensor = handle + impl]
// A Tensor is a shared_ptr to a TensorImpl, so copying a Tensor aliases it, as in PyTorch.
// A TensorImpl is a view: (storage, shape, strides, offset, dtype). Views (reshape, transpose,
// narrow, expand, ...) make a new TensorImpl over the same Storage, which is why an in-place
// write through one view is seen by all of them and bumps their shared version counter.
// The autograd fields live on the impl: requires_grad, grad, and for non-leaves the node that
// produced it (grad_fn) with the index of this tensor among that node's outputs.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/autograd/hook_handle.h"
#include "core/convert.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace ember {

namespace autograd {
struct Node;
struct TensorHooks;
}

class Tensor;
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (like an empty optional)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // --- metadata ---
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;
  int64_t dim() const;
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  size_t nbytes() const;  // numel() * element_size(dtype()); throws if that overflows
  const std::shared_ptr<Storage>& storage() const;

  // --- data access (host-side; CPU tensors for element access) ---
  void* raw_data() const;  // pointer to element 0 of this view
  template <class T>
  T* data() const {
    EMBER_CHECK(dtype_of<T>::value == dtype(), "[data] requested ", dtype_name(dtype_of<T>::value),
                " from a ", dtype_name(dtype()), " tensor");
    return static_cast<T*>(raw_data());
  }
  double item() const;  // one-element tensor, any dtype, any device
  // Read as T directly, so an int64 past 2^53 is exact; a float converts by Note [Float to
  // integer conversion].
  template <class T>
  T item() const {
    check_one_element();
    if constexpr (requires { dtype_of<T>::value; }) return to_vector<T>()[0];  // one of ember's dtypes
    else return convert<T>(to_vector<double>()[0]);
  }
  double at(std::initializer_list<int64_t> index) const;  // element access for tests
  void check_one_element() const;  // item()'s check: an Error unless numel() == 1
  template <class T>
  std::vector<T> to_vector() const;  // all elements in row-major order, converted to T

  // --- autograd ---
  bool requires_grad() const;
  const Tensor& requires_grad_(bool on = true) const;
  const Tensor& grad() const;
  void set_grad(const Tensor& g) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  int output_nr() const;
  bool is_leaf() const { return !grad_fn(); }
  Tensor detach() const;  // same storage, no history
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Calls hook(gradient) when backward has computed this tensor's gradient (summed over all its
  // uses); a defined result replaces the gradient. Note [Tensor hooks] in core/autograd/hooks.h.
  autograd::HookHandle register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Makes backward fill .grad of this non-leaf too (a leaf's is always filled). Note [retain_grad].
  void retain_grad() const;
  bool retains_grad() const;
  uint64_t version() const;

  // --- conversions ---
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor cpu() const { return to(kCPU); }

  // --- views (share storage; differentiable) ---
  Tensor view(const Shape& shape) const;     // requires compatible strides
  Tensor reshape(const Shape& shape) const;  // view when possible, else a copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor permute(const Shape& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // --- in-place (bump the version counter; not recorded by autograd). const: they change the
  // data, not which tensor this handle refers to. ---
  // add_ and sub_ write self +- alpha * other; an integer tensor takes only an integer operand
  // and alpha (Note [In-place arithmetic keeps the dtype]).
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& sub_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(double value) const;
  const Tensor& zero_() const;
  const Tensor& fill_(double value) const;
  const Tensor& copy_(const Tensor& src) const;

  // --- common ops as methods, for PyTorch-like chaining ---
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;

  std::string str() const;  // PyTorch-style printing (core/tensor_print.cpp)

 private:
  // The impl, or an ember::Error naming the running op (Note [Undefined tensors fail cleanly]).
  TensorImpl* live(const char* accessor) const {
    if (!impl_) [[unlikely]] undefined_tensor_error(accessor);
    return impl_.get();
  }
  [[noreturn]] static void undefined_tensor_error(const char* accessor);
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = kFloat32;

  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  int output_nr = 0;
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: their AccumulateGrad sink
  std::shared_ptr<autograd::TensorHooks> hooks;     // leaves: Note [Tensor hooks]
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// --- factories ---
struct TensorOptions {
  DType dtype = kFloat32;
  Device device = kCPU;
  bool requires_grad = false;
  TensorOptions() = default;
  TensorOptions(DType t) : dtype(t) { check_dtype(t, "TensorOptions"); }  // NOLINT: `zeros({2}, kInt64)` reads naturally
  TensorOptions(Device d) : device(d) {}  // NOLINT
  TensorOptions& with_dtype(DType t) { check_dtype(t, "TensorOptions"); dtype = t; return *this; }
  TensorOptions& with_device(Device d) { device = d; return *this; }
  TensorOptions& with_requires_grad(bool r = true) { requires_grad = r; return *this; }
};

Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
// A value the dtype cannot hold is an Error, as in PyTorch (1e300 in float32, NaN in int64); a
// 16-bit float is filled through float32, as PyTorch's full, so 70000 in float16 is inf there
// (fill_ refuses it; holds_value in core/dtype.h).
Tensor full(const Shape& shape, double value, TensorOptions options = {});
// A 0-d tensor; its value is converted unchecked, as PyTorch's scalar_tensor (1e300 in float16 is inf).
Tensor scalar_tensor(double value, TensorOptions options = {});
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
// Copies `values` (converted to options.dtype) into a new tensor of `shape`.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions options = {});
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options = {});
// Copies numel(shape) elements of type `dtype` from a raw host buffer.
Tensor from_buffer(const void* data, const Shape& shape, DType dtype, TensorOptions options = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});  // 1-D

// Random factories draw from the default generator of options.device (see generator.h); they
// live with the other random ops in core/ops/random.cpp.
Tensor rand(const Shape& shape, TensorOptions options = {});
Tensor randn(const Shape& shape, TensorOptions options = {});
// Integers uniform in [low, high); low and high must lie within +-2^53 (the draw goes through doubles).
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = kInt64);

// A new impl over existing storage (used by views and kernels' callers).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);

}  // namespace ember
