// Ops that draw random numbers: dropout.
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// Keeps a uint8 mask (one byte per element) for backward rather than the input or a float mask.
struct Dropout : Function<Dropout> {
  static constexpr const char* name = "dropout";
  struct State {
    double scale;  // 1 / (1 - p): what a kept element is multiplied by
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, double p) {
    Tensor keep = rand(x.shape(), TensorOptions(x.dtype()).with_device(x.device())) >= p;
    s.scale = 1.0 / (1.0 - p);
    c.save(keep);
    return x * keep * s.scale;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) { return {g * c.saved(0) * s.scale}; }
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
