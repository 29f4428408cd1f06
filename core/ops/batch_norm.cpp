// Batch normalisation: a training-mode op with a fused backward kernel (Note [Batch-norm
// backward]) and an evaluation-mode op, each with a one-slot forward (Note [Batch-norm forward
// slots]).
//
// Note [Batch-norm forward slots]
// Each mode's forward is one kernel-table slot, so that a backend with a fused implementation can
// take all of it: batch_norm_train_forward computes the batch statistics, the normalised output
// and the running-statistics update in one call, batch_norm_eval_forward the output from the
// running statistics. The functions *_by_parts below compose them of the finer slots
// (batch_norm_stats, batch_norm_apply) and ops, for any device: they are the CPU's slots, and the
// CUDA slots run them when cuDNN declines the call (Note [cuDNN's batch-norm forward] in
// cuda/cudnn/batch_norm.cpp). Both paths hand the backward the same mean and invstd.
#include <cmath>
#include <initializer_list>
#include <string>

#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

void kernels::batch_norm_train_forward_by_parts(const Tensor& x, int64_t n, int64_t c, int64_t s, const Tensor& weight,
                                                const Tensor& bias, double eps, const BatchNormRunning& running,
                                                const Tensor& out, const Tensor& mean, const Tensor& invstd) {
  const Tensor var = ops::empty_on({c}, mean.dtype(), x.device());
  batch_norm_stats[x.device()](x, n, c, s, mean, var);
  invstd.copy_(rsqrt(var + eps));
  batch_norm_apply[x.device()](x, n, c, s, mean, invstd, weight, bias, out);
  if (!running.mean.defined()) return;
  const double count = static_cast<double>(n * s);
  running.mean.mul_(1.0 - running.momentum).add_(mean, running.momentum);
  running.var.mul_(1.0 - running.momentum).add_(var, running.momentum * count / (count - 1.0));  // unbiased
}

void kernels::batch_norm_eval_forward_by_parts(const Tensor& x, int64_t n, int64_t c, int64_t s,
                                               const Tensor& running_mean, const Tensor& running_var,
                                               const Tensor& weight, const Tensor& bias, double eps,
                                               const Tensor& out) {
  batch_norm_apply[x.device()](x, n, c, s, running_mean, rsqrt(running_var + eps), weight, bias, out);
}

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

// Every dim of x but the channels': what a per-channel gradient sums over.
Shape all_but_channels(const Tensor& x) {
  Shape dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// The kernels read [c] vectors and x as flat arrays.
Tensor contiguous_if_defined(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

// x is contiguous; the forward computes the batch statistics (no gradient flows into them: the
// fused backward accounts for their dependence on x) and updates `running`.
struct BatchNormTrain : Function<BatchNormTrain> {
  static constexpr const char* name = "batch_norm";
  struct State {
    autograd::SavedRef input, weight, mean, invstd;  // mean and invstd: the batch's, per channel
  };
  static Tensor forward(Ctx& c, State& st, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                        const kernels::BatchNormRunning& running, DType stats) {
    const Layout l = layout_of(x);
    Tensor out = ops::empty_on(x.shape(), x.dtype(), x.device());
    Tensor mean = ops::empty_on({l.c}, stats, x.device()), invstd = ops::empty_on({l.c}, stats, x.device());
    kernels::batch_norm_train_forward[x.device()](x, l.n, l.c, l.s, weight, bias, eps, running, out, mean, invstd);
    st = {c.save(x), c.save(weight), c.save(mean), c.save(invstd)};
    return out;
  }
  static Grads backward(Ctx& c, const State& st, const Tensor& g) {
    Tensor x = c.get(st.input), weight = c.get(st.weight), mean = c.get(st.mean);
    const Layout l = layout_of(x);
    Tensor gx = ops::empty_on(x.shape(), x.dtype(), x.device());
    Tensor gw = c.needs_input_grad(1) ? ops::empty_on({l.c}, mean.dtype(), x.device()) : Tensor();
    Tensor gb = c.needs_input_grad(2) ? ops::empty_on({l.c}, mean.dtype(), x.device()) : Tensor();
    kernels::batch_norm_backward[x.device()](g.contiguous(), x, l.n, l.c, l.s, mean, c.get(st.invstd), weight, gx, gw,
                                             gb);
    return {c.needs_input_grad(0) ? gx : Tensor(), gw, gb};
  }
};

// x is contiguous. out = x * scale + shift per channel, scale = weight / sqrt(running_var + eps),
// so x's gradient is g * scale, bias's sum(g) and weight's sum(g * xhat), xhat = (x -
// running_mean) / sqrt(running_var + eps). The running statistics are buffers and get none, as
// in PyTorch.
struct BatchNormEval : Function<BatchNormEval> {
  static constexpr const char* name = "batch_norm";
  struct State {
    double eps;
    autograd::SavedRef input, running_mean, running_var, weight;
  };
  static Tensor forward(Ctx& c, State& st, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, double eps) {
    const Layout l = layout_of(x);
    Tensor out = ops::empty_on(x.shape(), x.dtype(), x.device());
    kernels::batch_norm_eval_forward[x.device()](x, l.n, l.c, l.s, running_mean, running_var, weight, bias, eps, out);
    st = {eps, c.save(x), c.save(running_mean), c.save(running_var), c.save(weight)};
    return out;
  }
  static Grads backward(Ctx& c, const State& st, const Tensor& g) {
    const Tensor x = c.get(st.input), weight = c.get(st.weight), running_mean = c.get(st.running_mean);
    const Tensor invstd = rsqrt(c.get(st.running_var) + st.eps);
    // With a 16-bit x and float32 statistics (Note [Mixed-dtype batch norm]), g and x widen to
    // float32 here, and x's gradient rounds back to x's dtype.
    const Tensor wide_g = g.to(running_mean.dtype());
    Tensor gx, gw, gb;
    if (c.needs_input_grad(0)) gx = (wide_g * per_channel(weight.defined() ? invstd * weight : invstd, x)).to(x.dtype());
    if (c.needs_input_grad(3))
      gw = sum(wide_g * ((x.to(running_mean.dtype()) - per_channel(running_mean, x)) * per_channel(invstd, x)),
               all_but_channels(x));
    if (c.needs_input_grad(4)) gb = sum(wide_g, all_but_channels(x));
    return {gx, Tensor(), Tensor(), gw, gb};
  }
};

// Note [Mixed-dtype batch norm]
// Under autocast a convolution gives a bfloat16 or float16 output while the BatchNorm after it
// keeps its weight, bias and running statistics in float32, as PyTorch's does: statistics
// averaged over many steps need more than 8 significant bits. So a 16-bit input may come with
// float32 channel vectors. The output and x's gradient are in x's dtype; the batch's mean and
// invstd, the running statistics and the weight's and bias's gradients stay float32, and the
// kernels compute in float32: the CPU's widen each 16-bit element as they load it and round each
// result once as they store it (core/cpu/batch_norm.cpp), which is bitwise what staging the 16-bit
// tensors through float32 gives (Note [Sixteen-bit floats through float32]) without the copies.
// The channel vectors share one dtype: x's, or float32 for a 16-bit x.
void check_channel_vector(const Tensor& v, int64_t channels, const Tensor& x, DType stats, const char* what) {
  if (!v.defined()) return;
  EMBER_CHECK(v.dim() == 1 && v.size(0) == channels, "[batch_norm] ", what, " of shape ", shape_str(v.shape()),
              " does not match the ", channels, " channels of input shape ", shape_str(x.shape()));
  ops::check_same_device(v, x, "batch_norm");
  EMBER_CHECK(v.dtype() == stats, "[batch_norm] ", what, " is ", v.dtype(), " but the input is ", x.dtype(),
              stats == x.dtype() ? "" : std::string(" and the other channel vectors are ") + dtype_name(stats));
}

// The dtype of the channel vectors: the first given one's when the input may mix with it, else x's.
DType stats_dtype(const Tensor& x, const std::initializer_list<const Tensor*>& vectors) {
  for (const Tensor* v : vectors)
    if (v->defined()) return is_sixteen_bit(x.dtype()) && v->dtype() == kFloat32 ? kFloat32 : x.dtype();
  return x.dtype();
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
  const DType stats = stats_dtype(x, {&running_mean, &running_var, &weight, &bias});
  check_channel_vector(running_mean, channels, x, stats, "running_mean");
  check_channel_vector(running_var, channels, x, stats, "running_var");
  check_channel_vector(weight, channels, x, stats, "weight");
  check_channel_vector(bias, channels, x, stats, "bias");
  EMBER_CHECK(running_mean.defined() == running_var.defined(), "[batch_norm] running_mean and running_var must be "
              "given together");

  const Tensor xc = x.contiguous(), w = contiguous_if_defined(weight), b = contiguous_if_defined(bias);
  if (!training && running_mean.defined())
    return BatchNormEval::apply(xc, running_mean.contiguous(), running_var.contiguous(), w, b, eps);

  const Layout l = layout_of(x);
  EMBER_CHECK(l.n * l.s > 1, "[batch_norm] expected more than 1 value per channel when training, got input of shape ",
              shape_str(x.shape()));
  kernels::BatchNormRunning running;
  if (training && update_running_stats && running_mean.defined()) running = {running_mean, running_var, momentum};
  return BatchNormTrain::apply(xc, w, b, eps, running, stats);
}

}  // namespace ember
