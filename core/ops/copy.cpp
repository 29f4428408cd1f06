// Copies and conversions (contiguous, clone, to(dtype), to(device)) and the in-place ops.
#include <cmath>
#include <optional>

#include "core/autograd/function.h"
#include "core/autograd/grad_mode.h"
#include "core/convert.h"
#include "core/memory_overlap.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

struct Clone : Function<Clone> {
  static constexpr const char* name = "clone";
  static Tensor forward(Ctx&, const Tensor& x) {
    Tensor out = ops::empty_on(x.shape(), x.dtype(), x.device());
    if (out.numel() > 0) kernels::copy[x.device()](x, out);
    return out;
  }
  static Grads backward(Ctx&, const Tensor& g) { return {g}; }
};

struct Cast : Function<Cast> {
  static constexpr const char* name = "to_dtype";
  struct State {
    DType input_dtype;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, DType dtype) {
    s.input_dtype = x.dtype();
    Tensor out = ops::empty_on(x.shape(), dtype, x.device());
    if (out.numel() > 0) kernels::copy[x.device()](x, out);
    return out;
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) { return {g.to(s.input_dtype)}; }
};

struct ToDevice : Function<ToDevice> {
  static constexpr const char* name = "to_device";
  struct State {
    Device input_device;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, Device device) {
    s.input_device = x.device();
    Tensor src = x.contiguous();
    Tensor out = ops::empty_on(x.shape(), x.dtype(), device);
    // The backend that is not the CPU owns the transfer kernel.
    if (out.numel() > 0) kernels::transfer[device.is_cpu() ? x.device() : device](src, out);
    return out;
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) { return {g.to(s.input_device)}; }
};

// Note [In-place ops and autograd]
// In-place ops write into the tensor's storage and bump its version counter, which is what
// invalidates any saved copy of the old values (see Note [Saved tensors and versions]). They are
// not recorded in the graph: writing in place into a tensor that takes part in autograd while
// grad mode is on is refused with a clear error rather than producing wrong gradients. Under
// NoGradGuard (optimizer steps, initialisation) they work on any tensor.
void check_inplace(const Tensor& self, const Tensor* other, const char* op) {
  ops::check_defined(self, op, "self");
  bool tracked = self.requires_grad() || (other && other->defined() && other->requires_grad());
  EMBER_CHECK(!(is_grad_enabled() && tracked), "[", op, "] in-place operation on a tensor of shape ",
              shape_str(self.shape()), " that takes part in autograd; use the out-of-place op, or run it "
              "under NoGradGuard");
}

// `other` (converted to self's dtype and device) broadcast to self's shape.
Tensor broadcast_into(const Tensor& self, const Tensor& other, const char* op) {
  ops::check_defined(other, op, "other");
  Shape shape = broadcast_shapes(self.shape(), other.shape(), op);
  EMBER_CHECK(shape == self.shape(), "[", op, "] cannot write a result of shape ", shape_str(shape),
              " into a tensor of shape ", shape_str(self.shape()));
  return other.to(self.device()).to(self.dtype()).expand(self.shape());
}

// Refuses writes whose result would depend on the order of the elements (Note [In-place writes and
// memory overlap]); `other` is the op's input as the caller passed it, before any conversion.
void check_overlap(const Tensor& self, const Tensor* other, const char* op) {
  check_no_internal_overlap(self, op);
  if (other) check_no_partial_overlap(self, *other, op);
}

// Note [In-place arithmetic keeps the dtype]
// An in-place op writes `self op other` into self, so the result must be one self's dtype holds,
// as PyTorch requires: an integer tensor takes no floating operand (int.add_(float) is refused,
// not truncated first), and its alpha or factor must be an integer that int64 holds (refused if
// it is a fraction, NaN or past the range). The integer arithmetic itself then wraps, as every
// integer op does (Note [Integer arithmetic]). A floating tensor takes any operand, converted to
// its dtype.
void check_result_keeps_dtype(const Tensor& self, const Tensor* other, std::optional<double> factor,
                              const char* factor_name, const char* op) {
  if (is_floating(self.dtype())) return;
  if (other)
    EMBER_CHECK(!is_floating(other->dtype()), "[", op, "] the result with a ", other->dtype(), " operand of shape ",
                shape_str(other->shape()), " is floating and cannot be written into the ", self.dtype(),
                " tensor of shape ", shape_str(self.shape()), " (convert one of them with to(dtype) first)");
  if (factor)
    EMBER_CHECK(*factor == std::floor(*factor) && fits_in_int64(*factor), "[", op, "] ", factor_name, " = ",
                *factor, " is not an integer, and an integer tensor (", self.dtype(), " of shape ",
                shape_str(self.shape()), ") can only be scaled by an integer in place");
}

// self += alpha * other, the body of add_ and sub_ (sub_ passes -alpha).
const Tensor& add_scaled(const Tensor& self, const Tensor& other, double alpha, const char* op) {
  check_inplace(self, &other, op);
  ops::check_defined(other, op, "other");
  check_result_keeps_dtype(self, &other, alpha, "alpha", op);
  Tensor y = broadcast_into(self, other, op);
  check_overlap(self, &other, op);
  if (alpha != 1.0)  // alpha * y in y's dtype (an integer one exactly, Note [Integer arithmetic])
    y = ops::unary_kernel(kernels::UnaryOp::AffineScalar, y, alpha, 0.0);
  if (self.numel() > 0) kernels::binary[self.device()](kernels::BinaryOp::Add, self, y, self);
  self.storage()->bump_version();
  return self;
}

}  // namespace

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : Clone::apply(*this); }
Tensor Tensor::clone() const { return Clone::apply(*this); }

Tensor Tensor::to(DType dtype_) const {
  check_dtype(dtype_, "to");
  if (dtype_ == dtype()) return *this;
  if (is_floating(dtype_)) return Cast::apply(*this, dtype_);
  // An integer result has no gradient: it leaves the graph, as in PyTorch, where x.round().long()
  // of an x that requires grad is a plain int64 tensor.
  NoGradGuard no_grad;
  return Cast::apply(*this, dtype_);
}

Tensor Tensor::to(Device device_) const {
  if (device_ == device()) return *this;
  return ToDevice::apply(*this, device_);
}

const Tensor& Tensor::add_(const Tensor& other, double alpha) const { return add_scaled(*this, other, alpha, "add_"); }
const Tensor& Tensor::sub_(const Tensor& other, double alpha) const { return add_scaled(*this, other, -alpha, "sub_"); }

const Tensor& Tensor::mul_(const Tensor& other) const {
  check_inplace(*this, &other, "mul_");
  ops::check_defined(other, "mul_", "other");
  check_result_keeps_dtype(*this, &other, std::nullopt, "", "mul_");
  Tensor y = broadcast_into(*this, other, "mul_");
  check_overlap(*this, &other, "mul_");
  if (numel() > 0) kernels::binary[device()](kernels::BinaryOp::Mul, *this, y, *this);
  storage()->bump_version();
  return *this;
}

const Tensor& Tensor::mul_(double value) const {
  check_inplace(*this, nullptr, "mul_");
  check_result_keeps_dtype(*this, nullptr, value, "the factor", "mul_");
  check_overlap(*this, nullptr, "mul_");
  if (numel() > 0) kernels::unary[device()](kernels::UnaryOp::AffineScalar, *this, *this, value, 0.0);
  storage()->bump_version();
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  check_inplace(*this, nullptr, "fill_");
  ops::check_fill_value(value, dtype(), shape(), "fill_");
  if (numel() > 0) kernels::fill[device()](*this, value);
  storage()->bump_version();
  return *this;
}

const Tensor& Tensor::zero_() const { return fill_(0.0); }

const Tensor& Tensor::copy_(const Tensor& src) const {
  check_inplace(*this, &src, "copy_");
  Tensor y = broadcast_into(*this, src, "copy_");
  check_overlap(*this, &src, "copy_");
  if (numel() > 0) kernels::copy[device()](y, *this);
  storage()->bump_version();
  return *this;
}

}  // namespace ember
