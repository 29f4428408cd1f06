// cumsum: running sums along a dim. y_j = x_0 + ... + x_j, so x_i reaches every y_j with j >= i
// and its gradient is the running sum of g from the back: a reverse cumsum, the same kernel.
#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// x contiguous: its running sums along d, from the front or from the back.
Tensor running_sums(const Tensor& x, int64_t d, bool reverse) {
  Tensor out = ops::empty_on(x.shape(), x.dtype(), x.device());
  const ops::Split3 s = ops::split_at(x.shape(), d);
  if (out.numel() > 0) kernels::cumsum[x.device()](x, s.outer, s.k, s.inner, reverse, out);
  return out;
}

struct Cumsum : Function<Cumsum> {
  static constexpr const char* name = "cumsum";
  struct State {
    int64_t dim;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, int64_t dim) {
    s.dim = dim;
    return running_sums(x.contiguous(), dim, false);
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) { return {running_sums(g.contiguous(), s.dim, true)}; }
};

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) {
  ops::check_defined(x, "cumsum");
  if (autocast::OpCast cast{"cumsum", x}) return cumsum(cast(x), dim);  // float32 on CUDA
  const int64_t d = wrap_dim(dim, x.dim(), "cumsum");
  // Integers (uint8 included) add up in int64, as PyTorch; a 0-d tensor is its own running sum.
  const Tensor input = is_floating(x.dtype()) ? x : x.to(kInt64);
  return Cumsum::apply(x.dim() == 0 ? input.reshape({1}) : input, d).reshape(x.shape());
}

}  // namespace ember
