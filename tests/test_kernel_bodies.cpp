// The CUDA kernels' per-thread bodies (core/kernel_bodies/*.h), compiled here as host code and
// run over every index of small problems, against naive loops written out in full: im2col and
// col2im (both index types, both column layouts), pooling forward and backward, the embedding
// lookup and its adjoint, batch norm's index walks and per-element math. Runs without a GPU; the
// CUDA kernels are thin loops around these very bodies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/kernel_bodies/batch_norm.h"
#include "core/kernel_bodies/embedding.h"
#include "core/kernel_bodies/im2col.h"
#include "core/kernel_bodies/pool.h"
#include "tests/batch_norm_moments.h"

using namespace ember;
using kernels::Window2d;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

template <class Body>
void run_all(int64_t count, const Body& body) {
  for (int64_t i = 0; i < count; ++i) body(i);
}

// Bitwise equality of two float arrays (NaN equal to NaN), naming the first difference.
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i];
    ASSERT_TRUE(same) << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
  }
}

// ---------------------------------------------------------------------------------------------
// im2col / col2im

struct ConvGeometry {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
};

Window2d window_of(const ConvGeometry& k) {
  Window2d g{};
  g.n = k.n, g.c = k.c, g.h = k.h, g.w = k.w, g.kh = k.kh, g.kw = k.kw, g.sh = k.sh, g.sw = k.sw, g.ph = k.ph,
  g.pw = k.pw, g.dh = k.dh, g.dw = k.dw;
  g.oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
  g.ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
  return g;
}

// Its arguments streamed into one string. (GCC 12's -Wrestrict misfires on "literal" + std::string.)
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

std::string describe(const ConvGeometry& k) {
  return cat("n", k.n, " c", k.c, " ", k.h, "x", k.w, " kernel ", k.kh, "x", k.kw, " stride ", k.sh, ",", k.sw, " pad ",
             k.ph, ",", k.pw, " dilation ", k.dh, ",", k.dw);
}

// Padding, strides, dilations, a kernel wider than the image, 1x1, a single output cell, odd sizes.
const std::vector<ConvGeometry> kConvCases = {
    {2, 3, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1}, {1, 2, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1}, {2, 1, 8, 5, 3, 2, 2, 3, 2, 0, 2, 1},
    {1, 2, 6, 6, 3, 3, 1, 2, 0, 3, 3, 2},  {3, 2, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1}, {1, 1, 3, 4, 5, 5, 1, 1, 2, 2, 1, 1},
    {2, 2, 9, 4, 2, 4, 3, 1, 1, 2, 4, 1},  {1, 3, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1}, {1, 1, 10, 10, 3, 3, 4, 3, 0, 1, 2, 3},
};

// cols[n, (c*kh + i)*kw + j, o] at n*sample + row*row_stride + o, written out directly.
std::vector<float> naive_im2col(const std::vector<float>& x, const Window2d& g, int64_t sample, int64_t row_stride) {
  std::vector<float> cols(static_cast<size_t>(g.n * g.c * g.kh * g.kw * g.oh * g.ow));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j)
          for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
              const int64_t h = oh * g.sh - g.ph + i * g.dh, w = ow * g.sw - g.pw + j * g.dw;
              const bool inside = h >= 0 && h < g.h && w >= 0 && w < g.w;
              const int64_t row = (c * g.kh + i) * g.kw + j;
              cols[static_cast<size_t>(n * sample + row * row_stride + oh * g.ow + ow)] =
                  inside ? x[static_cast<size_t>(((n * g.c + c) * g.h + h) * g.w + w)] : 0.0f;
            }
  return cols;
}

// The adjoint by scattering each column entry into the cell it read, taps in (i, j) order: the
// CPU's col2im order, so the sums are bitwise comparable.
std::vector<float> naive_col2im(const std::vector<float>& cols, const Window2d& g, int64_t sample, int64_t row_stride) {
  std::vector<float> x(static_cast<size_t>(g.n * g.c * g.h * g.w), 0.0f);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j)
          for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
              const int64_t h = oh * g.sh - g.ph + i * g.dh, w = ow * g.sw - g.pw + j * g.dw;
              if (h < 0 || h >= g.h || w < 0 || w >= g.w) continue;
              const int64_t row = (c * g.kh + i) * g.kw + j;
              x[static_cast<size_t>(((n * g.c + c) * g.h + h) * g.w + w)] +=
                  cols[static_cast<size_t>(n * sample + row * row_stride + oh * g.ow + ow)];
            }
  return x;
}

// The two column layouts of Note [CUDA convolution]: per sample [N, CK, cells], or [CK, N, cells].
struct Layout {
  int64_t sample, row_stride;
};
std::vector<Layout> layouts_of(const Window2d& g) {
  const int64_t cells = g.oh * g.ow, ck = g.c * g.kh * g.kw;
  return {{ck * cells, cells}, {cells, g.n * cells}};
}

template <class I>
void check_im2col(const ConvGeometry& k) {
  const Window2d g = window_of(k);
  const std::vector<float> x = random_values(g.n * g.c * g.h * g.w, 1);
  for (const Layout& l : layouts_of(g)) {
    std::vector<float> cols(static_cast<size_t>(g.n * g.c * g.kh * g.kw * g.oh * g.ow), kNaN);  // NaN: unwritten
    const conv_bodies::ColumnLayout<I> layout{static_cast<I>(l.sample), static_cast<I>(l.row_stride)};
    run_all(g.n * g.c * g.oh * g.ow,
            conv_bodies::Im2colBody<float, I>{x.data(), conv_bodies::Geometry<I>::from(g), layout, cols.data()});
    expect_same(cols, naive_im2col(x, g, l.sample, l.row_stride),
                cat("im2col ", describe(k), " row stride ", l.row_stride));
  }
}

template <class I>
void check_col2im(const ConvGeometry& k) {
  const Window2d g = window_of(k);
  const std::vector<float> cols = random_values(g.n * g.c * g.kh * g.kw * g.oh * g.ow, 2);
  for (const Layout& l : layouts_of(g)) {
    std::vector<float> x(static_cast<size_t>(g.n * g.c * g.h * g.w), kNaN);
    const conv_bodies::Geometry<I> geometry = conv_bodies::Geometry<I>::from(g);
    const conv_bodies::Col2imBody<float, I> body{cols.data(),
                                                 geometry,
                                                 {static_cast<I>(l.sample), static_cast<I>(l.row_stride)},
                                                 conv_bodies::TapStep<I>::of(geometry.sh, geometry.dh),
                                                 conv_bodies::TapStep<I>::of(geometry.sw, geometry.dw),
                                                 x.data()};
    run_all(g.n * g.c * g.h * g.w, body);
    expect_same(x, naive_col2im(cols, g, l.sample, l.row_stride),
                cat("col2im ", describe(k), " row stride ", l.row_stride));
  }
}

TEST(KernelBodies, Im2colMatchesNaiveLoops) {
  for (const ConvGeometry& k : kConvCases) {
    check_im2col<int32_t>(k);
    check_im2col<int64_t>(k);
  }
}

TEST(KernelBodies, Col2imMatchesNaiveScatterBitwise) {
  for (const ConvGeometry& k : kConvCases) {
    check_col2im<int32_t>(k);
    check_col2im<int64_t>(k);
  }
}

// Every (stride, dilation) pair up to 5 and every offset: the carried quotient and remainder are
// those of a division at every tap.
TEST(KernelBodies, TapWalkStepsLikeDivision) {
  for (int64_t stride = 1; stride <= 5; ++stride)
    for (int64_t dilation = 1; dilation <= 5; ++dilation)
      for (int64_t start = 0; start < 30; ++start) {
        const auto step = conv_bodies::TapStep<int64_t>::of(stride, dilation);
        conv_bodies::TapWalk<int64_t> walk(start, step);
        for (int64_t tap = 0; tap < 8; ++tap, walk.next(step)) {
          const int64_t at = start - tap * dilation;
          const int64_t q = at >= 0 ? at / stride : -((-at + stride - 1) / stride);  // floor division
          ASSERT_EQ(walk.q, q) << "stride " << stride << " dilation " << dilation << " start " << start << " tap " << tap;
          ASSERT_EQ(walk.r, at - q * stride);
        }
      }
}

// ---------------------------------------------------------------------------------------------
// pooling

struct PoolGeometry {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
};

// Overlapping windows, padding up to half the kernel, windows clipped at every border, 1x1.
const std::vector<PoolGeometry> kPoolCases = {
    {2, 2, 6, 6, 2, 2, 2, 2, 0, 0}, {1, 3, 7, 5, 3, 3, 2, 2, 1, 1}, {2, 1, 5, 8, 3, 2, 1, 3, 1, 1},
    {1, 2, 4, 4, 3, 3, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {1, 2, 9, 7, 4, 3, 3, 2, 2, 1},
};

Window2d pool_window(const PoolGeometry& k) {
  Window2d g{};
  g.n = k.n, g.c = k.c, g.h = k.h, g.w = k.w, g.kh = k.kh, g.kw = k.kw, g.sh = k.sh, g.sw = k.sw, g.ph = k.ph,
  g.pw = k.pw;
  g.oh = (k.h + 2 * k.ph - k.kh) / k.sh + 1;
  g.ow = (k.w + 2 * k.pw - k.kw) / k.sw + 1;
  return g;
}

// The input cells [h0, h1) x [w0, w1) of output (oh, ow), clipped, written out.
struct Box {
  int64_t h0, h1, w0, w1;
};
Box box_of(const Window2d& g, int64_t oh, int64_t ow) {
  const int64_t h = oh * g.sh - g.ph, w = ow * g.sw - g.pw;
  return {std::max<int64_t>(h, 0), std::min(h + g.kh, g.h), std::max<int64_t>(w, 0), std::min(w + g.kw, g.w)};
}

TEST(KernelBodies, MaxPoolForwardAndBackwardMatchNaiveLoops) {
  for (const PoolGeometry& k : kPoolCases) {
    const Window2d g = pool_window(k);
    std::vector<float> x = random_values(g.n * g.c * g.h * g.w, 3);
    if (x.size() > 5) {    // not in the 1x1 case
      x[1] = x[2] = kNaN;  // a NaN wins its windows (the last NaN, as in PyTorch)
      x[5] = x[4];         // a tie: the first one wins
    }
    const int64_t outs = g.n * g.c * g.oh * g.ow;
    std::vector<float> out(static_cast<size_t>(outs));
    std::vector<int64_t> at(static_cast<size_t>(outs));
    run_all(outs, pooling::MaxPoolForwardBody<float>{x.data(), pooling::PoolWindows{g, false}, out.data(), at.data()});
    std::vector<float> want(static_cast<size_t>(outs));
    std::vector<int64_t> want_at(static_cast<size_t>(outs));
    for (int64_t p = 0; p < g.n * g.c; ++p)
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const Box b = box_of(g, oh, ow);
          float best = -INFINITY;
          int64_t best_at = b.h0 * g.w + b.w0;
          for (int64_t h = b.h0; h < b.h1; ++h)
            for (int64_t w = b.w0; w < b.w1; ++w) {
              const float v = x[static_cast<size_t>(p * g.h * g.w + h * g.w + w)];
              if (v > best || std::isnan(v)) best = v, best_at = h * g.w + w;
            }
          const size_t o = static_cast<size_t>((p * g.oh + oh) * g.ow + ow);
          want[o] = best;
          want_at[o] = best_at;
        }
    expect_same(out, want, "max_pool2d forward");
    EXPECT_EQ(at, want_at);

    // backward: the gather body against a scatter in output order, starting from a nonzero grad_x
    const std::vector<float> grad_out = random_values(outs, 4);
    std::vector<float> grad_x(x.size(), 0.5f), want_grad(x.size(), 0.5f);
    run_all(static_cast<int64_t>(x.size()),
            pooling::GatherBody<float, pooling::PoolWindows, pooling::MaxShare<float>>{
                pooling::PoolWindows{g, false}, {grad_out.data(), at.data()}, grad_x.data(), true});
    for (int64_t o = 0; o < outs; ++o) {
      const int64_t plane = o / (g.oh * g.ow);
      want_grad[static_cast<size_t>(plane * g.h * g.w + want_at[static_cast<size_t>(o)])] += grad_out[static_cast<size_t>(o)];
    }
    expect_same(grad_x, want_grad, "max_pool2d backward");
  }
}

TEST(KernelBodies, AvgPoolForwardAndBackwardMatchNaiveLoops) {
  for (const PoolGeometry& k : kPoolCases) {
    for (const bool include_pad : {false, true}) {
      const Window2d g = pool_window(k);
      const std::vector<float> x = random_values(g.n * g.c * g.h * g.w, 5);
      const int64_t outs = g.n * g.c * g.oh * g.ow;
      const pooling::PoolWindows windows{g, include_pad};
      std::vector<float> out(static_cast<size_t>(outs), kNaN), want(static_cast<size_t>(outs));
      run_all(outs, pooling::AverageForwardBody<float, pooling::PoolWindows>{x.data(), windows, out.data()});
      const std::vector<float> grad_out = random_values(outs, 6);
      std::vector<float> grad_x(x.size(), kNaN), want_grad(x.size(), 0.0f);
      run_all(static_cast<int64_t>(x.size()), pooling::GatherBody<float, pooling::PoolWindows, pooling::AverageShare<float>>{
                                                  windows, {grad_out.data()}, grad_x.data(), false});
      for (int64_t p = 0; p < g.n * g.c; ++p)
        for (int64_t oh = 0; oh < g.oh; ++oh)
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const Box b = box_of(g, oh, ow);
            const int64_t divisor = include_pad ? g.kh * g.kw : (b.h1 - b.h0) * (b.w1 - b.w0);
            double sum = 0;
            for (int64_t h = b.h0; h < b.h1; ++h)
              for (int64_t w = b.w0; w < b.w1; ++w) sum += x[static_cast<size_t>(p * g.h * g.w + h * g.w + w)];
            const size_t o = static_cast<size_t>((p * g.oh + oh) * g.ow + ow);
            want[o] = static_cast<float>(sum / static_cast<double>(divisor));
            const float share = grad_out[o] / static_cast<float>(divisor);
            for (int64_t h = b.h0; h < b.h1; ++h)
              for (int64_t w = b.w0; w < b.w1; ++w) want_grad[static_cast<size_t>(p * g.h * g.w + h * g.w + w)] += share;
          }
      const char* what = include_pad ? " (count_include_pad)" : "";
      expect_same(out, want, cat("avg_pool2d forward", what));
      expect_same(grad_x, want_grad, cat("avg_pool2d backward", what));
    }
  }
}

TEST(KernelBodies, AdaptiveAvgPoolMatchesNaiveLoops) {
  // output larger than, equal to, smaller than, and not dividing the input
  for (auto [h, w, oh, ow] : std::vector<std::array<int64_t, 4>>{{5, 7, 3, 2}, {4, 4, 4, 4}, {3, 2, 5, 4}, {7, 9, 1, 1}}) {
    Window2d g{};
    g.n = 2, g.c = 2, g.h = h, g.w = w, g.oh = oh, g.ow = ow;
    const std::vector<float> x = random_values(g.n * g.c * h * w, 7);
    const int64_t outs = g.n * g.c * oh * ow;
    const pooling::AdaptiveWindows windows{g};
    std::vector<float> out(static_cast<size_t>(outs), kNaN), want(static_cast<size_t>(outs));
    run_all(outs, pooling::AverageForwardBody<float, pooling::AdaptiveWindows>{x.data(), windows, out.data()});
    const std::vector<float> grad_out = random_values(outs, 8);
    std::vector<float> grad_x(x.size(), kNaN), want_grad(x.size(), 0.0f);
    run_all(static_cast<int64_t>(x.size()), pooling::GatherBody<float, pooling::AdaptiveWindows, pooling::AverageShare<float>>{
                                                windows, {grad_out.data()}, grad_x.data(), false});
    for (int64_t p = 0; p < g.n * g.c; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          // PyTorch's rule: [floor(i * h / oh), ceil((i + 1) * h / oh))
          const int64_t h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh, w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
          double sum = 0;
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b) sum += x[static_cast<size_t>(p * h * w + a * w + b)];
          const size_t o = static_cast<size_t>((p * oh + i) * ow + j);
          const int64_t divisor = (h1 - h0) * (w1 - w0);
          want[o] = static_cast<float>(sum / static_cast<double>(divisor));
          const float share = grad_out[o] / static_cast<float>(divisor);
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b) want_grad[static_cast<size_t>(p * h * w + a * w + b)] += share;
        }
    expect_same(out, want, "adaptive_avg_pool2d forward");
    expect_same(grad_x, want_grad, "adaptive_avg_pool2d backward");
  }
}

// ---------------------------------------------------------------------------------------------
// embedding

TEST(KernelBodies, EmbeddingLookupAndAdjointMatchNaiveLoops) {
  const int64_t num = 5, dim = 3;
  const std::vector<int64_t> ids = {3, 0, 3, -1, 4, 3, 5, 0, 2};  // repeats, and two ids outside [0, 5)
  const int64_t n = static_cast<int64_t>(ids.size());
  const std::vector<float> weight = random_values(num * dim, 9);
  std::vector<float> out(static_cast<size_t>(n * dim), 0.0f);
  run_all(n * dim, embedding_bodies::LookupBody<float>{weight.data(), ids.data(), num, dim, kNaN, out.data()});
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < dim; ++c) {
      const float got = out[static_cast<size_t>(j * dim + c)];
      const int64_t id = ids[static_cast<size_t>(j)];
      if (id < 0 || id >= num)
        EXPECT_TRUE(std::isnan(got)) << "id " << id;
      else
        EXPECT_EQ(got, weight[static_cast<size_t>(id * dim + c)]);
    }

  // the adjoint over ids stably sorted, as CUB leaves them
  std::vector<int64_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(), [&](int64_t a, int64_t b) { return ids[static_cast<size_t>(a)] < ids[static_cast<size_t>(b)]; });
  std::vector<int64_t> sorted(ids.size());
  for (size_t q = 0; q < ids.size(); ++q) sorted[q] = ids[static_cast<size_t>(positions[q])];
  const std::vector<float> grad = random_values(n * dim, 10);
  std::vector<float> grad_weight(static_cast<size_t>(num * dim), 0.0f), want(static_cast<size_t>(num * dim), 0.0f);
  run_all(n * dim, embedding_bodies::SumRunsBody<float>{grad.data(), sorted.data(), positions.data(), n, num, dim,
                                                        grad_weight.data()});
  for (int64_t j = 0; j < n; ++j) {
    const int64_t id = ids[static_cast<size_t>(j)];
    if (id < 0 || id >= num) continue;
    for (int64_t c = 0; c < dim; ++c) want[static_cast<size_t>(id * dim + c)] += grad[static_cast<size_t>(j * dim + c)];
  }
  expect_same(grad_weight, want, "embedding backward");
}

// ---------------------------------------------------------------------------------------------
// batch norm

// Every start and step, through several samples and wraps: the carried digits equal a division.
TEST(KernelBodies, BatchNormChannelWalksMatchDivision) {
  for (auto [n, c, s] : std::vector<std::array<int64_t, 3>>{{3, 4, 5}, {2, 3, 1}, {4, 1, 7}, {1, 5, 16}, {5, 2, 3}}) {
    for (int64_t step : {int64_t{1}, int64_t{2}, int64_t{3}, s, s + 1, 2 * s + 3, c * s, 7 * c * s + 2}) {
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t start = 0; start < std::min<int64_t>(n * s, 9); ++start) {
          batch_norm_bodies::ChannelWalk walk(start, ch, c, s, step);
          for (int64_t j = start; j < n * s; j += step, walk.advance())
            ASSERT_EQ(walk.offset, (j / s) * c * s + ch * s + j % s)
                << "n" << n << " c" << c << " s" << s << " step " << step << " channel " << ch << " j " << j;
        }
      for (int64_t start = 0; start < std::min<int64_t>(n * c * s, 11); ++start) {
        batch_norm_bodies::ChannelOf at(start, c, s, step);
        for (int64_t i = start; i < n * c * s; i += step, at.advance())
          ASSERT_EQ(at.channel, (i / s) % c) << "n" << n << " c" << c << " s" << s << " step " << step << " i " << i;
      }
    }
  }
}

TEST(KernelBodies, BatchNormApplyAndGradInputMatchTheFormulas) {
  const int64_t n = 3, c = 4, s = 5, numel = n * c * s;
  const std::vector<float> x = random_values(numel, 11), g = random_values(numel, 12);
  const std::vector<float> mean = {0.1f, -0.3f, 0.7f, 0.0f}, invstd = {1.5f, 0.8f, 2.0f, 1.0f};
  const std::vector<float> weight = {0.5f, -1.0f, 2.0f, 1.5f}, bias = {0.2f, 0.0f, -0.4f, 1.0f};
  for (const bool affine : {false, true}) {
    std::vector<float> out(static_cast<size_t>(numel), kNaN);
    const batch_norm_bodies::ApplyBody<float> body{x.data(), mean.data(), invstd.data(), affine ? weight.data() : nullptr,
                                                   affine ? bias.data() : nullptr, out.data()};
    for (int64_t i = 0; i < numel; ++i) body(i, (i / s) % c);
    for (int64_t i = 0; i < numel; ++i) {
      const size_t ch = static_cast<size_t>((i / s) % c);
      const double want = (x[static_cast<size_t>(i)] - mean[ch]) * static_cast<double>(invstd[ch]) *
                              (affine ? weight[ch] : 1.0) + (affine ? bias[ch] : 0.0);
      EXPECT_NEAR(out[static_cast<size_t>(i)], want, 1e-5 * (1 + std::abs(want))) << "element " << i;
    }
  }

  // grad_x = w * invstd / M * (M g - sum(g) - xhat sum(g xhat)), written out in double per channel
  std::vector<batch_norm_bodies::GradInput<float>> coefficients(static_cast<size_t>(c));
  std::vector<double> sum_g(static_cast<size_t>(c)), sum_g_xhat(static_cast<size_t>(c));
  for (int64_t i = 0; i < numel; ++i) {
    const size_t ch = static_cast<size_t>((i / s) % c);
    sum_g[ch] += g[static_cast<size_t>(i)];
    sum_g_xhat[ch] += g[static_cast<size_t>(i)] * (x[static_cast<size_t>(i)] - static_cast<double>(mean[ch])) * invstd[ch];
  }
  const double count = static_cast<double>(n * s);
  for (size_t ch = 0; ch < static_cast<size_t>(c); ++ch)
    coefficients[ch] = batch_norm_bodies::grad_input_coefficients<float>(sum_g[ch], sum_g_xhat[ch], invstd[ch], weight[ch], count);
  std::vector<float> grad_x(static_cast<size_t>(numel), kNaN);
  const batch_norm_bodies::GradInputBody<float> body{g.data(), x.data(), mean.data(), coefficients.data(), grad_x.data()};
  for (int64_t i = 0; i < numel; ++i) body(i, (i / s) % c);
  for (int64_t i = 0; i < numel; ++i) {
    const size_t ch = static_cast<size_t>((i / s) % c);
    const double xhat = (x[static_cast<size_t>(i)] - static_cast<double>(mean[ch])) * invstd[ch];
    const double want = weight[ch] * static_cast<double>(invstd[ch]) / count *
                        (count * g[static_cast<size_t>(i)] - sum_g[ch] - xhat * sum_g_xhat[ch]);
    EXPECT_NEAR(grad_x[static_cast<size_t>(i)], want, 1e-5 * (1 + std::abs(want))) << "element " << i;
  }
}

}  // namespace

// Batch norm's statistics are the shared Note [Shifted moments], bitwise (test_cuda runs the same
// check on a GPU).
TEST(KernelBodies, BatchNormStatisticsAreTheSharedMomentsBitwise) {
  testutil::expect_batch_norm_stats_are_the_shared_moments(kCPU);
}
