// Triangles of the last two dims (tril, triu) and the causal attention mask built from one.
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// uint8 [rows, cols], 1 where column j and row i satisfy j - i <= diagonal (lower) or
// j - i >= diagonal (upper). Built on `device` from two aranges, so no host loop and no copy.
Tensor triangle_mask(int64_t rows, int64_t cols, int64_t diagonal, bool lower, Device device) {
  const TensorOptions options = TensorOptions(kInt64).with_device(device);
  Tensor offset = arange(static_cast<double>(cols), options) - arange(static_cast<double>(rows), options).unsqueeze(1);
  Tensor bound = ops::wrap_scalar(static_cast<double>(diagonal), offset);
  return lower ? le(offset, bound) : ge(offset, bound);
}

// Keeps one triangle of x's last two dims and zeroes the rest. The backward keeps the same
// triangle of the gradient, so nothing is saved: the mask is rebuilt from the State.
struct Triangle : Function<Triangle> {
  static constexpr const char* name = "triangle";
  struct State {
    int64_t diagonal;
    bool lower;
  };
  static Tensor keep(const Tensor& t, const State& s) {
    Tensor mask = triangle_mask(t.size(-2), t.size(-1), s.diagonal, s.lower, t.device());
    return where(mask, t, ops::wrap_scalar(0.0, t));
  }
  static Tensor forward(Ctx&, State& s, const Tensor& x, int64_t diagonal, bool lower) {
    s = {diagonal, lower};
    return keep(x, s);
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) { return {keep(g, s)}; }
};

Tensor triangle(const Tensor& x, int64_t diagonal, bool lower) {
  const char* op = lower ? "tril" : "triu";
  ops::check_defined(x, op);
  EMBER_CHECK(x.dim() >= 2, "[", op, "] expects a tensor of at least 2 dims, got shape ", shape_str(x.shape()));
  return Triangle::apply(x, diagonal, lower);
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false); }

Tensor causal_mask(int64_t size, Device device) {
  EMBER_CHECK(size >= 0, "[causal_mask] size must be >= 0, got ", size);
  return triangle_mask(size, size, 0, true, device);
}

}  // namespace ember
