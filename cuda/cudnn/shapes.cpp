#include "cuda/cudnn/shapes.h"

#include <climits>

namespace ember::cuda {
namespace {

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// The four sizes as ints, if they and their product (the element count, which bounds every
// stride) fit one.
std::optional<std::array<int, 4>> dims4(int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t count = 1;
  for (const int64_t v : {a, b, c, d}) {
    if (!fits_int(v)) return std::nullopt;
    if (v != 0 && count > INT_MAX / v) return std::nullopt;
    count *= v;
  }
  return std::array<int, 4>{static_cast<int>(a), static_cast<int>(b), static_cast<int>(c), static_cast<int>(d)};
}

}  // namespace

std::optional<CudnnConvShapes> cudnn_conv_shapes(const kernels::Window2d& g, int64_t out_channels) {
  const auto x = dims4(g.n, g.c, g.h, g.w);
  const auto weight = dims4(out_channels, g.c, g.kh, g.kw);
  const auto out = dims4(g.n, out_channels, g.oh, g.ow);
  for (const int64_t v : {g.ph, g.pw, g.sh, g.sw, g.dh, g.dw})
    if (!fits_int(v)) return std::nullopt;
  if (!x || !weight || !out) return std::nullopt;
  return CudnnConvShapes{*x,
                         *weight,
                         *out,
                         {static_cast<int>(g.ph), static_cast<int>(g.pw)},
                         {static_cast<int>(g.sh), static_cast<int>(g.sw)},
                         {static_cast<int>(g.dh), static_cast<int>(g.dw)}};
}

std::optional<std::array<int, 4>> cudnn_batch_norm_shape(int64_t n, int64_t c, int64_t s, BatchNormPass pass) {
  const int64_t max_batch =
      pass == BatchNormPass::Training ? kCudnnBatchNormMaxTrainingBatch : kCudnnBatchNormMaxInferenceBatch;
  if (n > max_batch || n * c * s == 0) return std::nullopt;
  return dims4(n, c, s, 1);
}

}  // namespace ember::cuda
