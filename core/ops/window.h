#pragma once
// Note [Window geometry]
// Convolution and pooling slide a window of `kernel` cells, `dilation` apart, in steps of
// `stride` over the input padded by `padding` on each side. Along one dim the output has
//   out = (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1
// cells (rounded down: PyTorch's ceil_mode=false). window2d() validates these arguments for every
// op of the family, so conv and pooling reject bad geometry with the same words, and returns the
// kernels::Window2d the kernels take. Ops keep it for backward in their State (Note [Op state]).
#include <string>

#include "core/kernels.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember::ops {

inline std::string pair_str(Pair p) { return shape_str({p[0], p[1]}); }

// x must be a floating point [N, C, H, W] tensor with H, W > 0 (N == 0 is a valid empty batch).
inline void check_nchw(const Tensor& x, const char* op) {
  check_defined(x, op);
  EMBER_CHECK(x.dim() == 4, "[", op, "] expected a 4-D input [N, C, H, W], got input of shape ", shape_str(x.shape()));
  check_floating(x, op);
  EMBER_CHECK(x.size(2) > 0 && x.size(3) > 0, "[", op, "] expected non-empty height and width, got input of shape ",
              shape_str(x.shape()));
}

// Throws unless both entries of p are >= min; `context` ends the message.
inline void check_at_least(Pair p, int64_t min, const char* what, const char* op, const std::string& context) {
  EMBER_CHECK(p[0] >= min && p[1] >= min, "[", op, "] ", what, " must be >= ", min, ", got ", pair_str(p), context);
}

struct WindowArgs {
  Pair kernel, stride, padding, dilation{1, 1};
};

// dilation * (kernel - 1) + 1 cells along one dim, or nullopt when that overflows int64.
inline std::optional<int64_t> window_extent(int64_t kernel, int64_t dilation) {
  const std::optional<int64_t> span = try_mul(dilation, kernel - 1);
  return span ? try_add(*span, 1) : std::nullopt;
}

// size + 2 * padding along one dim, or nullopt when that overflows int64.
inline std::optional<int64_t> padded_size(int64_t size, int64_t padding) {
  const std::optional<int64_t> both_sides = try_mul(padding, 2);
  return both_sides ? try_add(size, *both_sides) : std::nullopt;
}

// The checks that need no input (kernel size, stride, dilation >= 1, padding >= 0, a window whose
// size fits int64), so that layers can run them when they are built (check_window_options in
// core/ops.h). `context` ends each message: window2d adds the input's shape.
inline void check_window_args(const WindowArgs& a, const char* op, const std::string& context) {
  check_at_least(a.kernel, 1, "kernel size", op, context);
  check_at_least(a.stride, 1, "stride", op, context);
  check_at_least(a.padding, 0, "padding", op, context);
  check_at_least(a.dilation, 1, "dilation", op, context);
  const bool fits = window_extent(a.kernel[0], a.dilation[0]) && window_extent(a.kernel[1], a.dilation[1]) &&
                    try_mul(a.kernel[0], a.kernel[1]);
  EMBER_CHECK(fits, "[", op, "] the window (kernel ", pair_str(a.kernel), ", dilation ", pair_str(a.dilation),
              ") is too large: its size overflows int64", context);
}

// The geometry of sliding `a` over x (already through check_nchw); throws naming `op` when an
// argument is out of range or the output would be empty. Extents, padded sizes and the window's
// cell count are computed with overflow checks (Note [Checked size arithmetic]), so a huge
// padding or dilation is reported with its real value.
inline kernels::Window2d window2d(const Tensor& x, const WindowArgs& a, const char* op) {
  check_window_args(a, op, " (input of shape " + shape_str(x.shape()) + ")");
  const int64_t h = x.size(2), w = x.size(3);
  const Pair extent{*window_extent(a.kernel[0], a.dilation[0]), *window_extent(a.kernel[1], a.dilation[1])};
  const std::optional<int64_t> padded_h = padded_size(h, a.padding[0]), padded_w = padded_size(w, a.padding[1]);
  EMBER_CHECK(padded_h && padded_w, "[", op, "] padding ", pair_str(a.padding),
              " is too large: the padded size of input of shape ", shape_str(x.shape()), " overflows int64");
  const Pair padded{*padded_h, *padded_w};
  EMBER_CHECK(extent[0] <= padded[0] && extent[1] <= padded[1], "[", op, "] the window ", pair_str(extent),
              " (kernel ", pair_str(a.kernel), ", dilation ", pair_str(a.dilation),
              ") is larger than the padded input ", pair_str(padded), " (input of shape ", shape_str(x.shape()),
              ", padding ", pair_str(a.padding), "): the output would be empty");
  kernels::Window2d g{};
  g.n = x.size(0);
  g.c = x.size(1);
  g.h = h;
  g.w = w;
  g.kh = a.kernel[0];
  g.kw = a.kernel[1];
  g.sh = a.stride[0];
  g.sw = a.stride[1];
  g.ph = a.padding[0];
  g.pw = a.padding[1];
  g.dh = a.dilation[0];
  g.dw = a.dilation[1];
  g.oh = (padded[0] - extent[0]) / g.sh + 1;
  g.ow = (padded[1] - extent[1]) / g.sw + 1;
  checked_mul(g.oh, g.ow, op, {g.n, g.c, g.oh, g.ow});  // conv views the output plane as oh * ow cells
  return g;
}

}  // namespace ember::ops
