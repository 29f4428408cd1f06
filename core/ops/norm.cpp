// Batch normalisation: the training-mode op has a fused backward kernel (Note [Batch-norm
// backward]); evaluation mode is an affine map per channel, left to ordinary ops.
#include <cmath>

#include "core/autograd/function.h"
#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

struct Layout {
  int64_t n, c, s;
};

Layout layout_of(const Tensor& x) { return {x.size(0), x.size(1), x.numel() / std::max<int64_t>(x.size(0) * x.size(1), 1)}; }

// [C] -> [1, C, 1, ...] so that it broadcasts over x.
Tensor per_channel(const Tensor& v, const Tensor& x) {
  Shape shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return v.reshape(shape);
}

// x is contiguous; mean and invstd are the batch statistics (no gradient flows into them: the
// fused backward accounts for their dependence on x).
struct BatchNormTrain : Function<BatchNormTrain> {
  static constexpr const char* name = "batch_norm";
  static Tensor forward(Ctx& c, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& mean,
                        const Tensor& invstd) {
    const Layout l = layout_of(x);
    Tensor out = ops::empty_on(x.shape(), x.dtype(), x.device());
    kernels::batch_norm_apply[x.device()](x, l.n, l.c, l.s, mean, invstd, weight, bias, out);
    c.save(x);
    c.save(weight);
    c.save(mean);
    c.save(invstd);
    return out;
  }
  static Grads backward(Ctx& c, const Tensor& g) {
    Tensor x = c.saved(0), weight = c.saved(1);
    const Layout l = layout_of(x);
    Tensor gx = ops::empty_on(x.shape(), x.dtype(), x.device());
    Tensor gw = c.needs_input_grad(1) ? ops::empty_on({l.c}, x.dtype(), x.device()) : Tensor();
    Tensor gb = c.needs_input_grad(2) ? ops::empty_on({l.c}, x.dtype(), x.device()) : Tensor();
    kernels::batch_norm_backward[x.device()](g.contiguous(), x, l.n, l.c, l.s, c.saved(2), c.saved(3), weight, gx,
                                             gw, gb);
    return {c.needs_input_grad(0) ? gx : Tensor(), gw, gb, Tensor(), Tensor()};
  }
};

void check_channel_vector(const Tensor& v, int64_t channels, const Tensor& x, const char* what) {
  if (!v.defined()) return;
  EMBER_CHECK(v.dim() == 1 && v.size(0) == channels, "[batch_norm] ", what, " of shape ", shape_str(v.shape()),
              " does not match the ", channels, " channels of input shape ", shape_str(x.shape()));
  ops::check_same_device(v, x, "batch_norm");
  EMBER_CHECK(v.dtype() == x.dtype(), "[batch_norm] ", what, " is ", v.dtype(), " but the input is ", x.dtype());
}

}  // namespace

void check_batch_norm_options(double eps, double momentum, const char* op) {
  EMBER_CHECK(std::isfinite(eps) && eps > 0.0, "[", op, "] eps must be finite and > 0, got ", eps);
  EMBER_CHECK(std::isfinite(momentum) && momentum >= 0.0 && momentum <= 1.0, "[", op,
              "] momentum must be in [0, 1], got ", momentum);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps, bool update_running_stats) {
  ops::check_defined(x, "batch_norm");
  EMBER_CHECK(x.dim() >= 2, "[batch_norm] expects input of shape [N, C, ...], got ", shape_str(x.shape()));
  ops::check_floating(x, "batch_norm");
  check_batch_norm_options(eps, momentum, "batch_norm");
  const int64_t channels = x.size(1);
  check_channel_vector(running_mean, channels, x, "running_mean");
  check_channel_vector(running_var, channels, x, "running_var");
  check_channel_vector(weight, channels, x, "weight");
  check_channel_vector(bias, channels, x, "bias");
  EMBER_CHECK(running_mean.defined() == running_var.defined(), "[batch_norm] running_mean and running_var must be "
              "given together");

  if (!training && running_mean.defined()) {
    Tensor scale = rsqrt(running_var + eps);
    if (weight.defined()) scale = scale * weight;
    Tensor shift = -running_mean * scale;
    if (bias.defined()) shift = shift + bias;
    return x * per_channel(scale, x) + per_channel(shift, x);
  }

  const Layout l = layout_of(x);
  EMBER_CHECK(l.n * l.s > 1, "[batch_norm] expected more than 1 value per channel when training, got input of shape ",
              shape_str(x.shape()));
  Tensor xc = x.contiguous();
  Tensor mean = ops::empty_on({channels}, x.dtype(), x.device()), var = ops::empty_on({channels}, x.dtype(), x.device());
  kernels::batch_norm_stats[x.device()](xc, l.n, l.c, l.s, mean, var);
  Tensor out = BatchNormTrain::apply(xc, weight, bias, mean, rsqrt(var + eps));
  if (training && update_running_stats && running_mean.defined()) {
    NoGradGuard no_grad;
    const double m = static_cast<double>(l.n * l.s);
    running_mean.mul_(1.0 - momentum).add_(mean, momentum);
    running_var.mul_(1.0 - momentum).add_(var, momentum * m / (m - 1.0));  // unbiased estimate
  }
  return out;
}

}  // namespace ember
