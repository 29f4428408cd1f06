// conv2d: the autograd node; the CPU kernels are in core/cpu/conv.cpp.
//
// Note [Convolution as im2col + gemm]
// im2col copies every input window of sample n into a column: cols_n [C*KH*KW, OH*OW]. Then the
// convolution of that sample is one matrix product, out_n = W [OC, C*KH*KW] @ cols_n, which runs
// at BLAS speed. Backward is two more products and the adjoint of im2col (col2im):
//   grad_W = sum_n g_n @ cols_n^T      grad_x_n = col2im(W^T @ g_n)      grad_b = sum of g over n, h, w
// The columns are NOT saved for backward: they are about KH*KW times the input (9x for a 3x3
// kernel at stride 1), so keeping them would multiply the activation memory of every conv layer,
// and activation checkpointing measures exactly the bytes ops save. The node saves the input and
// the weight (as PyTorch does) and the weight gradient recomputes the columns from the input: a
// memory-bound copy that is cheap next to the gemms. The kernels never hold the whole batch's
// columns either (Note [Convolution by samples]). A 1x1 kernel at stride 1 without padding needs
// no im2col at all: the input, viewed as [C, H*W], already is the columns.
#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"
#include "core/ops/window.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;
using kernels::Window2d;

namespace {

struct Conv2d : Function<Conv2d> {
  static constexpr const char* name = "conv2d";
  struct State {
    Window2d window;
    autograd::SavedRef input, weight;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Window2d& g) {
    s = {g, c.save(x), c.save(weight)};
    const int64_t oc = weight.size(0);
    Tensor out = ops::empty_on({g.n, oc, g.oh * g.ow}, x.dtype(), x.device());
    if (out.numel() > 0) kernels::conv2d_forward[x.device()](x.contiguous(), flat_weight(weight, g), g, out);
    if (bias.defined()) out.add_(bias.view({1, oc, 1}));
    return out.view({g.n, oc, g.oh, g.ow});
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& grad) {
    const Window2d& g = s.window;
    const Tensor x = c.get(s.input), weight = c.get(s.weight);
    const Tensor g3 = grad.contiguous().view({g.n, weight.size(0), g.oh * g.ow});
    Tensor gx, gw, gb;
    if (c.needs_input_grad(0)) gx = ops::empty_on(x.shape(), x.dtype(), x.device());
    if (c.needs_input_grad(1)) gw = ops::empty_on(weight.shape(), weight.dtype(), weight.device());
    const auto wanted = [](const Tensor& t) { return t.defined() && t.numel() > 0; };
    const Tensor wanted_x = wanted(gx) ? gx : Tensor(), wanted_w = wanted(gw) ? flat_weight(gw, g) : Tensor();
    if (wanted_x.defined() || wanted_w.defined()) {
      const Tensor x_read = wanted_w.defined() ? x.contiguous() : x;  // only the weight's gradient reads x
      kernels::conv2d_backward[x.device()](g3, x_read, flat_weight(weight, g), g, wanted_x, wanted_w);
    }
    if (c.needs_input_grad(2)) gb = sum(g3, {0, 2});
    return {gx, gw, gb};
  }

 private:
  // The weight as the kernels read it: contiguous [OC, C*KH*KW].
  static Tensor flat_weight(const Tensor& weight, const Window2d& g) {
    return weight.contiguous().view({weight.size(0), g.c * g.kh * g.kw});
  }
};

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding, Pair dilation) {
  if (autocast::OpCast cast{"conv2d", x}) return conv2d(cast(x), cast(weight), cast(bias), stride, padding, dilation);
  ops::check_nchw(x, "conv2d");
  ops::check_defined(weight, "conv2d", "weight");
  EMBER_CHECK(weight.dim() == 4, "[conv2d] expected a 4-D weight [OC, C, KH, KW], got weight of shape ",
              shape_str(weight.shape()), " (input of shape ", shape_str(x.shape()), ")");
  EMBER_CHECK(weight.size(1) == x.size(1), "[conv2d] expected input with ", weight.size(1),
              " channels (weight of shape ", shape_str(weight.shape()), "), got input of shape ", shape_str(x.shape()));
  ops::check_same_device(x, weight, "conv2d");
  EMBER_CHECK(weight.dtype() == x.dtype(), "[conv2d] expected one dtype, got input ", x.dtype(), " and weight ",
              weight.dtype());
  if (bias.defined()) {
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "[conv2d] expected bias of shape [",
                weight.size(0), "] (weight of shape ", shape_str(weight.shape()), "), got bias of shape ",
                shape_str(bias.shape()));
    ops::check_same_device(x, bias, "conv2d");
    EMBER_CHECK(bias.dtype() == x.dtype(), "[conv2d] expected one dtype, got input ", x.dtype(), " and bias ",
                bias.dtype());
  }
  const Window2d g = ops::window2d(x, {{weight.size(2), weight.size(3)}, stride, padding, dilation}, "conv2d");
  return Conv2d::apply(x, weight, bias, g);
}

void check_window_options(Pair kernel, Pair stride, Pair padding, Pair dilation, const char* op) {
  ops::check_window_args({kernel, stride, padding, dilation}, op, "");
}

}  // namespace ember
