// Ops that draw random numbers: the factories rand, randn and randint, and dropout.
#include "core/autograd/function.h"
#include "core/generator.h"
#include "core/kernels.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

// --- random factories ---
namespace {
Tensor random_tensor(kernels::RandomKind kind, const Shape& shape, TensorOptions options, double a, double b) {
  EMBER_CHECK(is_floating(options.dtype), "[rand] expects a floating point dtype, got ", options.dtype);
  const bool wants_grad = options.requires_grad;
  Tensor t = empty(shape, options.with_requires_grad(false));
  if (t.numel() > 0) {
    auto [seed, offset] = default_generator(t.device()).reserve(static_cast<uint64_t>(t.numel()));
    kernels::random[t.device()](kind, t, seed, offset, a, b);
  }
  if (wants_grad) t.requires_grad_();
  return t;
}
}  // namespace

Tensor rand(const Shape& shape, TensorOptions options) {
  return random_tensor(kernels::RandomKind::Uniform, shape, options, 0.0, 1.0);
}

Tensor randn(const Shape& shape, TensorOptions options) {
  return random_tensor(kernels::RandomKind::Normal, shape, options, 0.0, 1.0);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options) {
  EMBER_CHECK(low < high, "[randint] low (", low, ") must be less than high (", high, ")");
  // The draw goes through doubles, which hold every integer only up to 2^53: past that, values
  // would repeat or leave [low, high) (and high - low could overflow int64).
  constexpr int64_t kExact = int64_t{1} << 53;
  EMBER_CHECK(low >= -kExact && high <= kExact, "[randint] low (", low, ") and high (", high, ") must be within [",
              -kExact, ", ", kExact, "], where doubles hold every integer");
  Tensor u = random_tensor(kernels::RandomKind::Uniform, shape, TensorOptions(kFloat64).with_device(options.device),
                           static_cast<double>(low), static_cast<double>(high));
  // floor() of a uniform in [low, high) is uniform over the integers. The int64 cast truncates
  // toward zero, which is floor for non-negative values, hence the shift to [0, high - low).
  Tensor offset = (u - static_cast<double>(low)).to(kInt64);
  return (offset + scalar_tensor(static_cast<double>(low), kInt64)).to(options.dtype);
}

// --- dropout ---
using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// mask ? x * scale : 0 in one pass (kernels::masked_scale), for the forward and the backward.
Tensor masked_scale(const Tensor& x, const Tensor& mask, double scale) {
  const Tensor in = x.contiguous();
  Tensor out = ops::empty_on(in.shape(), in.dtype(), in.device());
  if (out.numel() > 0) kernels::masked_scale[in.device()](in, mask, scale, out);
  return out;
}

// Keeps a uint8 mask (one byte per element) for backward rather than the input or a float mask.
struct Dropout : Function<Dropout> {
  static constexpr const char* name = "dropout";
  struct State {
    double scale;  // 1 / (1 - p): what a kept element is multiplied by
    autograd::SavedRef keep;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, double p) {
    Tensor keep = rand(x.shape(), TensorOptions(x.dtype()).with_device(x.device())) >= p;
    s.scale = 1.0 / (1.0 - p);
    s.keep = c.save(keep);
    return masked_scale(x, keep, s.scale);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) { return {masked_scale(g, c.get(s.keep), s.scale)}; }
};

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  ops::check_defined(x, "dropout");
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "[dropout] probability has to be between 0 and 1, but got ", p);
  ops::check_floating(x, "dropout");
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  return Dropout::apply(x, p);
}

}  // namespace ember
