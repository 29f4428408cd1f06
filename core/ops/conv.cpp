// conv2d: im2col + gemm forward, and its backward, side by side.
//
// Note [Convolution as im2col + gemm]
// im2col copies every input window into a column: cols [N, C*KH*KW, OH*OW]. Then the
// convolution of sample n is one matrix product, out_n = W [OC, C*KH*KW] @ cols_n, which runs at
// BLAS speed (the weight is broadcast over the batch with a stride-0 view, not copied).
// Backward is two more products and the adjoint of im2col:
//   grad_W = sum_n g_n @ cols_n^T      grad_x = col2im(W^T @ g_n)      grad_b = sum of g over n, h, w
// cols is NOT saved for backward: it is about KH*KW times the input (9x for a 3x3 kernel at
// stride 1), so keeping it would multiply the activation memory of every conv layer, and
// activation checkpointing measures exactly the bytes ops save. The node saves the input and
// the weight (as PyTorch does) and backward recomputes cols from the input: a memory-bound copy
// that is cheap next to the gemms. A 1x1 kernel at stride 1 without padding needs no im2col at
// all: the input, viewed as [N, C, H*W], already is cols.
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

bool is_pointwise(const Window2d& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// x as columns [N, C*KH*KW, OH*OW]; a view of x when the kernel is pointwise.
Tensor im2col(const Tensor& x, const Window2d& g) {
  const Tensor input = x.contiguous();
  if (is_pointwise(g)) return input.view({g.n, g.c, g.h * g.w});
  Tensor cols = ops::empty_on({g.n, g.c * g.kh * g.kw, g.oh * g.ow}, x.dtype(), x.device());
  if (cols.numel() > 0) kernels::im2col[x.device()](input, g, cols);
  return cols;
}

// The adjoint: every column entry added back at its input position, in a new [N, C, H, W].
Tensor col2im(const Tensor& cols, const Window2d& g) {
  if (is_pointwise(g)) return cols.view({g.n, g.c, g.h, g.w});
  Tensor x = zeros({g.n, g.c, g.h, g.w}, TensorOptions(cols.dtype()).with_device(cols.device()));
  if (cols.numel() > 0) kernels::col2im[cols.device()](cols, g, x);
  return x;
}

// [B, M, K] @ [B, K, N] through the matmul kernel: operands may be transposed or stride-0
// (broadcast) views, so neither the weight nor a transpose is ever copied.
Tensor bmm(const Tensor& a, const Tensor& b) {
  Tensor out = ops::empty_on({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  if (out.numel() > 0) kernels::matmul[a.device()](a, b, out);
  return out;
}

struct Conv2d : Function<Conv2d> {
  static constexpr const char* name = "conv2d";
  static Tensor forward(Ctx& c, const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& g) {
    c.save(x);
    c.save(weight);
    c.ints = ops::pack_window(g);
    const int64_t oc = weight.size(0);
    const Tensor w = weight.reshape({oc, g.c * g.kh * g.kw});
    Tensor out = bmm(w.unsqueeze(0).expand({g.n, oc, w.size(1)}), im2col(x, g));
    if (bias.defined()) out.add_(bias.view({1, oc, 1}));
    return out.view({g.n, oc, g.oh, g.ow});
  }
  static Grads backward(Ctx& c, const Tensor& grad) {
    const Window2d g = ops::unpack_window(c.ints);
    const Tensor x = c.saved(0), weight = c.saved(1);
    const int64_t oc = weight.size(0);
    const Tensor w = weight.reshape({oc, g.c * g.kh * g.kw});
    const Tensor g3 = grad.contiguous().view({g.n, oc, g.oh * g.ow});
    Tensor gx, gw, gb;
    if (c.needs_input_grad(0)) gx = col2im(bmm(w.t().unsqueeze(0).expand({g.n, w.size(1), oc}), g3), g);
    if (c.needs_input_grad(1)) gw = sum(bmm(g3, im2col(x, g).transpose(1, 2)), {0}).view(weight.shape());
    if (c.needs_input_grad(2)) gb = sum(g3, {0, 2});
    return {gx, gw, gb};
  }
};

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Pair stride, Pair padding, Pair dilation) {
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

}  // namespace ember
