#include "core/tensor.h"

#include <cmath>
#include <cstring>

#include "core/autograd/engine.h"
#include "core/autograd/node.h"
#include "core/autograd/op_label.h"
#include "core/convert.h"
#include "core/kernels.h"
#include "core/memory_category.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

// Note [Undefined tensors fail cleanly]
// Tensor() is a valid value (an absent optional argument), so an op can be handed one anywhere.
// Rather than every op testing every argument, every accessor that reads the impl tests it: the
// first use of an undefined tensor throws, naming the op that was running (the op label) and
// the accessor, instead of dereferencing null. The test is a predictable branch on a pointer the
// accessor loads anyway; the message is built out of line.
void Tensor::undefined_tensor_error(const char* accessor) {
  const char* op = autograd::current_op_label().op;
  if (op) EMBER_FAIL("[", op, "] an argument is an undefined tensor (Tensor::", accessor, "() was called on it)");
  EMBER_FAIL("[Tensor::", accessor, "] called on an undefined tensor");
}

// --- metadata ---
const Shape& Tensor::shape() const { return live(__func__)->shape; }
const Shape& Tensor::strides() const { return live(__func__)->strides; }
int64_t Tensor::offset() const { return live(__func__)->offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(live(__func__)->shape.size()); }
// A 0-d tensor has no dim to ask about, as in PyTorch (wrap_dim lets reductions name dim 0 or -1
// of one, so it is checked here first).
int64_t Tensor::size(int64_t d) const {
  EMBER_CHECK(dim() > 0, "[size] dim ", d, " of a 0-d tensor: it has no dims");
  return live(__func__)->shape[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  EMBER_CHECK(dim() > 0, "[stride] dim ", d, " of a 0-d tensor: it has no dims");
  return live(__func__)->strides[wrap_dim(d, dim(), "stride")];
}
int64_t Tensor::numel() const { return numel_of(live(__func__)->shape); }
size_t Tensor::nbytes() const {
  return static_cast<size_t>(checked_mul(numel(), static_cast<int64_t>(element_size(dtype())), "nbytes", shape()));
}
DType Tensor::dtype() const { return live(__func__)->dtype; }
Device Tensor::device() const { return live(__func__)->storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { return live(__func__)->storage; }
uint64_t Tensor::version() const { return live(__func__)->storage->version(); }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = live(__func__)->shape.size(); i-- > 0;) {
    if (live(__func__)->shape[i] == 1) continue;
    if (live(__func__)->strides[i] != expected) return false;
    expected *= live(__func__)->shape[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(live(__func__)->storage->data()) + live(__func__)->offset * static_cast<int64_t>(element_size(dtype()));
}

// --- autograd accessors ---
bool Tensor::requires_grad() const { return live(__func__)->requires_grad; }

const Tensor& Tensor::requires_grad_(bool on) const {
  EMBER_CHECK(is_leaf() || on, "[requires_grad_] can only change requires_grad of leaf tensors; "
              "use detach() to get a tensor without history");
  EMBER_CHECK(!on || is_floating(dtype()), "[requires_grad_] only floating point tensors can "
              "require gradients, got ", dtype());
  live(__func__)->requires_grad = on;
  return *this;
}

const Tensor& Tensor::grad() const { return live(__func__)->grad; }
// As PyTorch's `x.grad = g`: the gradient has the tensor's shape, dtype and device, which the
// engine's accumulation and the optimizers rely on (a float32 gradient on a bfloat16 parameter
// would be read as bfloat16 by a fused step).
void Tensor::set_grad(const Tensor& g) const {
  TensorImpl* impl = live(__func__);
  if (g.defined())
    EMBER_CHECK(g.shape() == shape() && g.dtype() == dtype() && g.device() == device(), "[set_grad] a gradient of ",
                g.dtype(), " ", shape_str(g.shape()), " on ", g.device(), " for a tensor of ", dtype(), " ",
                shape_str(shape()), " on ", device(), ": the gradient must have the tensor's shape, dtype and device");
  impl->grad = g;
  memory::tag(g, MemoryCategory::Gradients);  // Note [Memory by category]
}
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const { return live(__func__)->grad_fn; }
int Tensor::output_nr() const { return live(__func__)->output_nr; }

Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph);
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// --- factories ---
Tensor empty(const Shape& shape, TensorOptions options) {
  Shape strides = contiguous_strides(shape, "empty");  // validates the shape first
  const int64_t nbytes =
      checked_mul(numel_of(shape, "empty"), static_cast<int64_t>(element_size(options.dtype)), "empty", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), options.device);
  impl->shape = shape;
  impl->strides = std::move(strides);
  impl->dtype = options.dtype;
  Tensor t(std::move(impl));
  if (options.requires_grad) t.requires_grad_();
  return t;
}

namespace {
Tensor filled(const Shape& shape, double value, TensorOptions options) {
  const bool wants_grad = options.requires_grad;
  Tensor t = empty(shape, options.with_requires_grad(false));
  if (t.numel() > 0) kernels::fill[t.device()](t, value);
  if (wants_grad) t.requires_grad_();
  return t;
}
}  // namespace

Tensor full(const Shape& shape, double value, TensorOptions options) {
  ops::check_fill_value(value, options.dtype, shape, "full", is_sixteen_bit(options.dtype) ? kFloat32 : options.dtype);
  return filled(shape, value, options);
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
// Unchecked, as PyTorch's scalar_tensor: 1e300 in float16 is inf (ops::wrap_scalar relies on it).
Tensor scalar_tensor(double value, TensorOptions options) { return filled({}, value, options); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), TensorOptions(t.dtype()).with_device(t.device())); }

namespace {
// A factory's result from the CPU tensor it filled: converted to the requested dtype and device.
Tensor finish_host(const Tensor& host, TensorOptions options) {
  Tensor out = host.to(options.dtype).to(options.device);
  if (options.requires_grad) out.requires_grad_();
  return out;
}
}  // namespace

Tensor from_buffer(const void* data, const Shape& shape, DType dtype, TensorOptions options) {
  Tensor host = empty(shape, TensorOptions(dtype));
  if (host.numel() > 0) std::memcpy(host.raw_data(), data, host.nbytes());
  return finish_host(host, options);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options) {
  EMBER_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape, "from_vector"), "[from_vector] ", values.size(),
              " value(s) cannot fill a tensor of shape ", shape_str(shape));
  if constexpr (std::is_same_v<T, int>) {
    return from_vector(std::vector<int64_t>(values.begin(), values.end()), shape, options);
  } else {
    return from_buffer(values.data(), shape, dtype_of<T>::value, options);
  }
}
template Tensor from_vector(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<bfloat16>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<float16>&, const Shape&, TensorOptions);

Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions options) {
  EMBER_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape, "from_vector"), "[from_vector] ", values.size(),
              " value(s) cannot fill a tensor of shape ", shape_str(shape));
  return from_buffer(values.data(), shape, kFloat64, options);
}

Tensor tensor(std::initializer_list<double> values, TensorOptions options) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}, options);
}

Tensor arange(double end, TensorOptions options) { return arange(0.0, end, 1.0, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  EMBER_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step) && step != 0.0,
              "[arange] start ", start, ", end ", end, " and step ", step, " must be finite, with a nonzero step");
  const double span = (end - start) / step;  // may be inf: finite numbers can still overflow
  EMBER_CHECK(span >= 0, "[arange] start ", start, ", end ", end, " and step ", step, " are inconsistent");
  const double count = std::ceil(span);
  // 2^63 is exactly representable, so this comparison is exact; a count that reaches it cannot
  // be an int64 (and converting it would be undefined behaviour).
  EMBER_CHECK(count < 0x1p63, "[arange] start ", start, ", end ", end, " and step ", step,
              " give more than INT64_MAX elements");
  const auto n = static_cast<int64_t>(count);
  // Filled in place, not through a std::vector: a huge count fails in the allocator with an
  // ember::Error rather than with std::bad_alloc.
  Tensor host = empty({n}, kFloat64);
  double* out = host.data<double>();
  for (int64_t i = 0; i < n; ++i) out[i] = start + static_cast<double>(i) * step;
  return finish_host(host, options);
}

// --- element access ---
template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(kCPU).contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  dispatch_any(dtype(), [&]<class S>() {
    const S* p = host.data<S>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<T>(p[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;
template std::vector<uint8_t> Tensor::to_vector() const;
template std::vector<bfloat16> Tensor::to_vector() const;
template std::vector<float16> Tensor::to_vector() const;

void Tensor::check_one_element() const {
  EMBER_CHECK(numel() == 1, "[item] a tensor with ", numel(), " elements (shape ", shape_str(shape()),
              ") cannot be converted to a scalar");
}

double Tensor::item() const {
  check_one_element();
  return to_vector<double>()[0];
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  EMBER_CHECK(static_cast<int64_t>(index.size()) == dim(), "[at] got ", index.size(), " indices for a tensor of shape ",
              shape_str(shape()));
  int64_t off = offset();
  size_t d = 0;
  for (int64_t i : index) {
    EMBER_CHECK(i >= 0 && i < live(__func__)->shape[d], "[at] index ", i, " is out of range for dim ", d, " of size ",
                live(__func__)->shape[d]);
    off += i * live(__func__)->strides[d++];
  }
  return make_view(*this, {}, {}, off).item();
}

}  // namespace ember
