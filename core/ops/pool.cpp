// Pooling: max_pool2d, avg_pool2d, adaptive_avg_pool2d, forward and backward side by side.
//
// Note [Pooling backward]
// max_pool2d records, per output, the flat h*w position of its window's maximum; backward adds
// each output gradient at that position. The indices are saved like an activation (c.save), so
// saved-tensor hooks see them and checkpointing can drop and recompute them. The average pools
// save no tensor at all: backward spreads each output gradient evenly over its window, which
// needs only the geometry.
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

Tensor empty_output(const Tensor& x, const Window2d& g) {
  return ops::empty_on({g.n, g.c, g.oh, g.ow}, x.dtype(), x.device());
}

Tensor empty_input(const Tensor& grad, const Window2d& g) {
  return ops::empty_on({g.n, g.c, g.h, g.w}, grad.dtype(), grad.device());
}

struct MaxPool2d : Function<MaxPool2d> {
  static constexpr const char* name = "max_pool2d";
  struct State {
    Window2d window;
    autograd::SavedRef indices;  // of each output's maximum in its window
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Window2d& g) {
    Tensor out = empty_output(x, g), indices = ops::empty_on(out.shape(), kInt64, x.device());
    if (out.numel() > 0) kernels::max_pool2d_forward[x.device()](x.contiguous(), g, out, indices);
    s = {g, c.save(indices)};
    return out;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& grad) {
    const Window2d& g = s.window;
    Tensor gx = empty_input(grad, g).zero_();
    if (grad.numel() > 0) kernels::max_pool2d_backward[grad.device()](grad.contiguous(), c.get(s.indices), g, gx);
    return {gx};
  }
};

struct AvgPool2d : Function<AvgPool2d> {
  static constexpr const char* name = "avg_pool2d";
  struct State {
    Window2d window;
    bool count_include_pad;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, const Window2d& g, bool count_include_pad) {
    Tensor out = empty_output(x, g);
    if (out.numel() > 0) kernels::avg_pool2d_forward[x.device()](x.contiguous(), g, count_include_pad, out);
    s = {g, count_include_pad};
    return out;
  }
  static Grads backward(Ctx&, const State& s, const Tensor& grad) {
    const Window2d& g = s.window;
    Tensor gx = empty_input(grad, g);
    if (gx.numel() > 0) kernels::avg_pool2d_backward[grad.device()](grad.contiguous(), g, s.count_include_pad, gx);
    return {gx};
  }
};

struct AdaptiveAvgPool2d : Function<AdaptiveAvgPool2d> {
  static constexpr const char* name = "adaptive_avg_pool2d";
  struct State {
    Window2d window;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, const Window2d& g) {
    Tensor out = empty_output(x, g);
    if (out.numel() > 0) kernels::adaptive_avg_pool2d_forward[x.device()](x.contiguous(), g, out);
    s.window = g;
    return out;
  }
  static Grads backward(Ctx&, const State& s, const Tensor& grad) {
    const Window2d& g = s.window;
    Tensor gx = empty_input(grad, g);
    if (gx.numel() > 0) kernels::adaptive_avg_pool2d_backward[grad.device()](grad.contiguous(), g, gx);
    return {gx};
  }
};

// Checks the input and the window, plus PyTorch's rule for pooling that padding is at most half
// the kernel (so every window holds at least one input cell).
Window2d pool_window(const Tensor& x, Pair kernel, Pair stride, Pair padding, const char* op) {
  ops::check_nchw(x, op);
  const Window2d g = ops::window2d(x, {kernel, stride, padding}, op);
  EMBER_CHECK(padding[0] <= kernel[0] / 2 && padding[1] <= kernel[1] / 2, "[", op, "] padding ",
              ops::pair_str(padding), " must be at most half the kernel size ", ops::pair_str(kernel),
              " (input of shape ", shape_str(x.shape()), ")");
  return g;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding) {
  return MaxPool2d::apply(x, pool_window(x, kernel, stride, padding, "max_pool2d"));
}

Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool count_include_pad) {
  return AvgPool2d::apply(x, pool_window(x, kernel, stride, padding, "avg_pool2d"), count_include_pad);
}

Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size) {
  ops::check_nchw(x, "adaptive_avg_pool2d");
  ops::check_at_least(output_size, 1, "output size", "adaptive_avg_pool2d",
                      " (input of shape " + shape_str(x.shape()) + ")");
  // The adaptive windows compute (o + 1) * in + out - 1 and (i + 1) * out + in - 1, both below
  // (in + 1) * (out + 1); that product must fit in int64.
  const auto fits = [](int64_t in, int64_t out) {
    const std::optional<int64_t> p = try_mul(in + 1, out);
    return p && try_add(*p, in + 1);
  };
  EMBER_CHECK(fits(x.size(2), output_size[0]) && fits(x.size(3), output_size[1]), "[adaptive_avg_pool2d] output size ",
              ops::pair_str(output_size), " is too large for input of shape ", shape_str(x.shape()),
              ": the window arithmetic overflows int64");
  Window2d g{};  // only the sizes: adaptive windows follow from h / oh and w / ow
  g.n = x.size(0);
  g.c = x.size(1);
  g.h = x.size(2);
  g.w = x.size(3);
  g.oh = output_size[0];
  g.ow = output_size[1];
  return AdaptiveAvgPool2d::apply(x, g);
}

}  // namespace ember
