// conv2d and pooling: forward values on hand-computable inputs, conv2d against a direct
// convolution, gradcheck (float64), what backward keeps saved, and every error path.
#include <gtest/gtest.h>

#include <any>
#include <cmath>
#include <functional>
#include <limits>

#include "core/autograd/gradcheck.h"
#include "core/autograd/saved_tensor.h"
#include "core/allocator.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/ops/window.h"
#include "core/kernel_bodies/pool_windows.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::expect_near;
using autograd::gradcheck;

namespace {

// 0, 1, ..., h*w-1 as a [1, 1, h, w] image.
Tensor ramp(int64_t h, int64_t w) { return arange(static_cast<double>(h * w)).reshape({1, 1, h, w}); }

// A float64 leaf of standard normal values that requires grad.
Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }

void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs) {
  auto result = gradcheck(fn, inputs);
  EXPECT_TRUE(result.ok) << result.message;
}

struct ConvCase {
  int64_t n, c, h, w, oc, kh, kw;
  Pair stride, padding, dilation;
  bool bias;
};

// The textbook definition, one output element at a time, in double.
std::vector<double> direct_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvCase& k,
                                int64_t oh, int64_t ow) {
  const std::vector<double> xv = x.to_vector<double>(), wv = weight.to_vector<double>();
  const std::vector<double> bv = bias.defined() ? bias.to_vector<double>() : std::vector<double>(k.oc, 0.0);
  std::vector<double> out;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.oc; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bv[o];
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t b = 0; b < k.kw; ++b) {
                const int64_t y = i * k.stride[0] - k.padding[0] + a * k.dilation[0];
                const int64_t x_ = j * k.stride[1] - k.padding[1] + b * k.dilation[1];
                if (y < 0 || y >= k.h || x_ < 0 || x_ >= k.w) continue;
                acc += xv[((n * k.c + c) * k.h + y) * k.w + x_] * wv[((o * k.c + c) * k.kh + a) * k.kw + b];
              }
          out.push_back(acc);
        }
  return out;
}

// Records the shape of every tensor an op saves for backward.
struct SavedShapes {
  std::vector<Shape> shapes;
  autograd::SavedTensorHooks hooks() {
    return {[this](const Tensor& t) -> std::any {
              shapes.push_back(t.shape());
              return t;
            },
            [](const std::any& p) { return std::any_cast<Tensor>(p); }};
  }
};

class ConvPool : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(42); }
};

}  // namespace

TEST_F(ConvPool, ConvForwardByHand) {
  // x[i][j] = 4i + j and w = [[1, 2], [3, 4]]: each output is 10 x[i][j] + 34.
  const Tensor x = ramp(4, 4), w = tensor({1, 2, 3, 4}).reshape({1, 1, 2, 2});
  expect_near(conv2d(x, w, Tensor()), {34, 44, 54, 74, 84, 94, 114, 124, 134});
  expect_near(conv2d(x, w, Tensor(), {2, 2}), {34, 54, 114, 134});
  expect_near(conv2d(x, w, Tensor(), {1, 1}, {1, 1}),
              {0, 4, 11, 18, 9, 16, 34, 44, 54, 24, 40, 74, 84, 94, 40, 64, 114, 124, 134, 56, 24, 38, 41, 44, 15});
  // dilation 2: the taps x[i][j], x[i][j+2], x[i+2][j], x[i+2][j+2]
  expect_near(conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {2, 2}), {68, 78, 108, 118});
  expect_near(conv2d(x, w, tensor({0.5}), {1, 2}, {0, 1}), {16.5, 44.5, 24.5, 40.5, 84.5, 40.5, 64.5, 124.5, 56.5});
  EXPECT_EQ(conv2d(zeros({2, 3, 7, 5}), zeros({4, 3, 3, 2}), Tensor(), {2, 1}, {1, 0}).shape(), (Shape{2, 4, 4, 4}));
}

TEST_F(ConvPool, ConvMatchesDirectConvolution) {
  const std::vector<ConvCase> cases = {
      {2, 3, 7, 6, 4, 3, 3, {1, 1}, {0, 0}, {1, 1}, true},
      {2, 3, 8, 9, 5, 3, 2, {2, 1}, {1, 0}, {1, 1}, false},
      {1, 2, 9, 9, 3, 3, 3, {1, 2}, {2, 1}, {2, 2}, true},
      {2, 3, 5, 4, 2, 2, 3, {3, 2}, {1, 1}, {1, 2}, true},
      {3, 4, 5, 5, 2, 1, 1, {1, 1}, {0, 0}, {1, 1}, true},   // 1x1: no im2col
      {2, 2, 6, 7, 3, 1, 1, {2, 2}, {0, 0}, {1, 1}, false},  // 1x1 strided: im2col
      {1, 1, 5, 5, 1, 5, 5, {1, 1}, {0, 0}, {1, 1}, true},   // the kernel covers the image
      {2, 3, 4, 4, 2, 3, 3, {1, 1}, {2, 2}, {3, 3}, false},  // windows mostly in the padding
      // same-size outputs at stride 1, lowered in blocks (Note [im2col in blocks])
      {2, 3, 7, 6, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},
      {1, 2, 6, 5, 3, 5, 5, {1, 1}, {2, 2}, {1, 1}, false},
      {2, 2, 8, 7, 3, 3, 3, {1, 1}, {2, 2}, {2, 2}, true},   // dilated
      {1, 3, 5, 6, 2, 3, 1, {1, 1}, {1, 0}, {1, 1}, false},  // padding along one dim only
      {1, 1, 2, 3, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},   // taps wider than the image
      {1, 1, 5, 3, 1, 3, 5, {1, 1}, {1, 2}, {1, 1}, false},  // some taps entirely in the padding
  };
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const ConvCase& k : cases) {
      const Tensor x = randn({k.n, k.c, k.h, k.w}, dtype), w = randn({k.oc, k.c, k.kh, k.kw}, dtype);
      const Tensor b = k.bias ? randn({k.oc}, dtype) : Tensor();
      const Tensor out = conv2d(x, w, b, k.stride, k.padding, k.dilation);
      const int64_t oh = (k.h + 2 * k.padding[0] - k.dilation[0] * (k.kh - 1) - 1) / k.stride[0] + 1;
      const int64_t ow = (k.w + 2 * k.padding[1] - k.dilation[1] * (k.kw - 1) - 1) / k.stride[1] + 1;
      SCOPED_TRACE(testing::Message() << "case " << &k - cases.data() << " dtype " << dtype);
      ASSERT_EQ(out.shape(), (Shape{k.n, k.oc, oh, ow}));
      EXPECT_EQ(out.dtype(), dtype);
      expect_near(out, direct_conv(x, w, b, k, oh, ow), dtype == kFloat32 ? 1e-4 : 1e-10);
    }
  }
}

TEST_F(ConvPool, ConvTakesStridedInputAndEmptyBatch) {
  const Tensor base = randn({2, 5, 6, 3}), w = randn({4, 3, 3, 3});
  const Tensor x = base.permute({0, 3, 1, 2});  // NHWC memory seen as NCHW
  ASSERT_FALSE(x.is_contiguous());
  expect_near(conv2d(x, w, Tensor(), {1, 1}, {1, 1}),
              conv2d(x.contiguous(), w, Tensor(), {1, 1}, {1, 1}).to_vector<double>());

  const Tensor empty_x = zeros({0, 3, 5, 5}).requires_grad_(), weight = randn({4, 3, 3, 3}).requires_grad_();
  const Tensor out = conv2d(empty_x, weight, zeros({4}).requires_grad_());
  EXPECT_EQ(out.shape(), (Shape{0, 4, 3, 3}));
  sum(out).backward();
  EXPECT_EQ(empty_x.grad().shape(), (Shape{0, 3, 5, 5}));
  expect_near(weight.grad(), std::vector<double>(108, 0.0));
}

TEST_F(ConvPool, ConvGradcheck) {
  struct Geometry {
    Pair stride, padding, dilation;
  };
  const std::vector<Geometry> geometries = {
      {{1, 1}, {0, 0}, {1, 1}}, {{2, 2}, {0, 0}, {1, 1}}, {{1, 1}, {1, 1}, {1, 1}},
      {{1, 1}, {0, 0}, {2, 2}}, {{2, 1}, {1, 2}, {2, 1}},
  };
  for (const Geometry& g : geometries) {
    auto fn = [g](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], g.stride, g.padding, g.dilation); };
    SCOPED_TRACE(testing::Message() << "stride " << g.stride[0] << "x" << g.stride[1] << " padding " << g.padding[0]
                                    << "x" << g.padding[1] << " dilation " << g.dilation[0] << "x" << g.dilation[1]);
    expect_gradcheck(fn, {leaf({2, 2, 6, 5}), leaf({3, 2, 3, 2}), leaf({3})});
    expect_gradcheck(fn, {leaf({1, 2, 5, 6}), leaf({2, 2, 2, 3}), Tensor()});  // no bias
  }
  auto plain = [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2]); };
  expect_gradcheck(plain, {leaf({2, 3, 4, 4}), leaf({2, 3, 1, 1}), leaf({2})});  // 1x1: no im2col
  // an input that does not require grad (a network's first layer), and a frozen weight
  expect_gradcheck(plain, {randn({2, 2, 5, 5}, kFloat64), leaf({3, 2, 3, 3}), leaf({3})});
  expect_gradcheck(plain, {leaf({2, 2, 5, 5}), randn({3, 2, 3, 3}, kFloat64), Tensor()});
}

// Note [Convolution by samples] splits the batch into one block per thread, each with its own
// columns and partial weight gradient. Every split must give the same values as one thread.
TEST_F(ConvPool, ConvBatchSplitOverThreadsGivesTheSameValues) {
  const int threads_before = get_num_threads();
  const Tensor x = randn({7, 3, 6, 6}, kFloat64), b = randn({4}, kFloat64);
  struct Geometry {
    Tensor weight;
    Pair stride, padding;
  };
  const std::vector<Geometry> geometries = {{randn({4, 3, 3, 3}, kFloat64), {1, 1}, {1, 1}},
                                            {randn({4, 3, 3, 3}, kFloat64), {2, 2}, {0, 0}},
                                            {randn({4, 3, 1, 1}, kFloat64), {1, 1}, {0, 0}}};  // pointwise
  auto run = [&](const Geometry& g) {  // the output and the gradients of sum(out^2)
    const Tensor xl = x.detach().requires_grad_(), wl = g.weight.detach().requires_grad_();
    const Tensor out = conv2d(xl, wl, b, g.stride, g.padding);
    sum(out * out).backward();
    return std::vector<Tensor>{out, xl.grad(), wl.grad()};
  };
  set_num_threads(1);
  std::vector<std::vector<Tensor>> serial;
  for (const Geometry& g : geometries) serial.push_back(run(g));
  for (int threads : {2, 3, 8}) {  // 8 threads: more than the 7 samples, so one block
    set_num_threads(threads);
    for (size_t i = 0; i < geometries.size(); ++i) {
      SCOPED_TRACE(testing::Message() << threads << " threads, geometry " << i);
      const std::vector<Tensor> split = run(geometries[i]);
      for (size_t k = 0; k < split.size(); ++k) expect_near(split[k], serial[i][k].to_vector<double>(), 1e-12);
    }
  }
  set_num_threads(threads_before);
}

// The kernels hold one sample's columns per thread, never the whole batch's (58 MB per layer for
// ResNet-20 at batch 128): a forward allocates exactly its output and those columns.
TEST_F(ConvPool, ConvForwardHoldsOneSamplesColumnsPerThread) {
  const testutil::ReferenceConvScope reference;  // the im2col kernel's columns are what is counted
  const int threads_before = get_num_threads();
  set_num_threads(2);
  const Tensor x = randn({16, 8, 16, 16}), w = randn({4, 8, 3, 3});
  const int64_t output_bytes = 16 * 4 * 16 * 16 * 4, sample_columns_bytes = 8 * 9 * 16 * 16 * 4;
  const int64_t base = memory::stats().live_bytes;
  memory::reset_peak();
  const Tensor out = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  EXPECT_EQ(memory::stats().live_bytes - base, output_bytes);
  EXPECT_EQ(memory::stats().peak_bytes - base, output_bytes + 2 * sample_columns_bytes);
  set_num_threads(threads_before);
}

TEST_F(ConvPool, ConvSavesInputAndWeightNotColumns) {
  // See Note [Convolution as im2col + gemm]: the [N, C*KH*KW, OH*OW] columns are recomputed.
  const Tensor x = randn({2, 3, 8, 8}).requires_grad_(), w = randn({4, 3, 3, 3}).requires_grad_();
  SavedShapes saved;
  Tensor y;
  {
    autograd::SavedTensorHooksGuard guard(saved.hooks());
    y = conv2d(x, w, randn({4}).requires_grad_(), {1, 1}, {1, 1});
  }
  EXPECT_EQ(saved.shapes, (std::vector<Shape>{{2, 3, 8, 8}, {4, 3, 3, 3}}));
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), x.shape());
}

TEST_F(ConvPool, MaxPoolForwardAndRouting) {
  const Tensor x = ramp(4, 4);
  expect_near(max_pool2d(x, {2, 2}, {2, 2}), {5, 7, 13, 15});
  expect_near(max_pool2d(x, {3, 3}, {1, 1}, {1, 1}), {5, 6, 7, 7, 9, 10, 11, 11, 13, 14, 15, 15, 13, 14, 15, 15});
  expect_near(max_pool2d(x, {2, 3}, {2, 1}), {6, 7, 14, 15});
  // padding is -inf: on a negative image the padded windows still pick a real cell
  const Tensor neg = (-ramp(4, 4)).requires_grad_();
  Tensor y = max_pool2d(neg, {3, 3}, {2, 2}, {1, 1});
  expect_near(y, {0, -1, -4, -5});
  sum(y).backward();
  expect_near(neg.grad(), {1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // ties: the first maximum of each window takes the gradient
  const Tensor flat = ones({1, 1, 4, 4}).requires_grad_();
  sum(max_pool2d(flat, {2, 2}, {2, 2})).backward();
  expect_near(flat.grad(), {1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0});
  // overlapping windows that share a maximum add up their gradients
  const Tensor peak = from_vector({0, 0, 0, 0, 9, 0, 0, 0, 0}, {1, 1, 3, 3}).requires_grad_();
  sum(max_pool2d(peak, {2, 2}, {1, 1})).backward();
  expect_near(peak.grad(), {0, 0, 0, 0, 4, 0, 0, 0, 0});
  // NaN propagates, as PyTorch
  const Tensor with_nan = from_vector({1.0, std::numeric_limits<double>::quiet_NaN(), 3.0, 4.0}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(with_nan, {2, 2}, {2, 2}).item()));
}

// The CUDA pooling backward gathers from the windows in Candidates (Note [Pooling backward by
// gathering] in cuda/pool.cu); a window missing from them would lose its gradient there. The
// rule is plain C++ shared by both devices, so it is checked here against every window.
TEST_F(ConvPool, PoolCandidatesIncludeEveryCoveringWindow) {
  auto check = [](const auto& windows) {
    const kernels::Window2d& g = windows.g;
    for (int64_t h = 0; h < g.h; ++h) {
      for (int64_t w = 0; w < g.w; ++w) {
        const pooling::Candidates rows = windows.rows(h), cols = windows.cols(w);
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            if (!windows(oh, ow).covers(h, w)) continue;
            EXPECT_TRUE(oh >= rows.lo && oh <= rows.hi && ow >= cols.lo && ow <= cols.hi)
                << "input (" << h << ", " << w << ") is in window (" << oh << ", " << ow << ") of a " << g.h << "x"
                << g.w << " image, outside the candidate rows [" << rows.lo << ", " << rows.hi << "] and columns ["
                << cols.lo << ", " << cols.hi << "]";
          }
        }
      }
    }
  };
  for (int64_t k : {1, 2, 3, 5}) {
    for (int64_t stride : {1, 2, 3}) {
      for (int64_t pad = 0; pad <= k / 2; ++pad) {
        const Tensor x = zeros({1, 1, 11, 8});
        check(pooling::PoolWindows{ops::window2d(x, {{k, k}, {stride, stride}, {pad, pad}, {1, 1}}, "test"), true});
      }
    }
  }
  for (int64_t out_h : {1, 3, 4, 11, 15}) {
    for (int64_t out_w : {1, 2, 5, 8}) {
      kernels::Window2d g{};
      g.n = g.c = 1;
      g.h = 11;
      g.w = 8;
      g.oh = out_h;
      g.ow = out_w;
      check(pooling::AdaptiveWindows{g});
    }
  }
}

TEST_F(ConvPool, MaxPoolSavesOnlyIndices) {
  SavedShapes saved;
  const Tensor x = randn({2, 3, 6, 6}).requires_grad_();
  {
    autograd::SavedTensorHooksGuard guard(saved.hooks());
    max_pool2d(x, {2, 2}, {2, 2});
    avg_pool2d(x, {2, 2}, {2, 2});
    adaptive_avg_pool2d(x, {1, 1});
  }
  EXPECT_EQ(saved.shapes, (std::vector<Shape>{{2, 3, 3, 3}}));  // max_pool2d's int64 indices
}

TEST_F(ConvPool, AvgPoolForward) {
  const Tensor x = ramp(4, 4);
  expect_near(avg_pool2d(x, {2, 2}, {2, 2}), {2.5, 4.5, 10.5, 12.5});
  // 3x3 windows at stride 2 over 1 cell of padding: the corner window holds 0, 1, 4, 5
  expect_near(avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}), {10.0 / 9, 24.0 / 9, 51.0 / 9, 10});
  expect_near(avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false), {2.5, 4, 8.5, 10});
  expect_near(avg_pool2d(x, {1, 2}, {1, 2}), {0.5, 2.5, 4.5, 6.5, 8.5, 10.5, 12.5, 14.5});
}

TEST_F(ConvPool, AdaptiveAvgPoolForward) {
  // 5 rows -> 2: [0, 3) and [2, 5); 7 columns -> 3: [0, 3), [2, 5), [4, 7)
  const Tensor x = ramp(5, 7);
  expect_near(adaptive_avg_pool2d(x, {2, 3}), {8, 10, 12, 22, 24, 26});
  expect_near(adaptive_avg_pool2d(x, {1, 1}), {17});
  expect_near(adaptive_avg_pool2d(x, {5, 7}), x.to_vector<double>());
  const Tensor y = randn({2, 3, 4, 6});
  expect_near(adaptive_avg_pool2d(y, {2, 3}), avg_pool2d(y, {2, 2}, {2, 2}).to_vector<double>());
  expect_near(adaptive_avg_pool2d(y, {1, 1}), mean(y, {2, 3}).to_vector<double>());
  EXPECT_EQ(adaptive_avg_pool2d(y, {6, 9}).shape(), (Shape{2, 3, 6, 9}));  // upsampling windows
}

TEST_F(ConvPool, PoolGradcheck) {
  auto max_pool = [](Pair k, Pair s, Pair p) {
    return [=](const std::vector<Tensor>& v) { return max_pool2d(v[0], k, s, p); };
  };
  expect_gradcheck(max_pool({2, 2}, {2, 2}, {0, 0}), {leaf({2, 2, 4, 6})});
  expect_gradcheck(max_pool({3, 3}, {1, 1}, {1, 1}), {leaf({1, 2, 5, 5})});  // overlapping windows
  expect_gradcheck(max_pool({3, 2}, {2, 1}, {1, 1}), {leaf({2, 1, 6, 5})});
  auto avg_pool = [](Pair k, Pair s, Pair p, bool count_include_pad) {
    return [=](const std::vector<Tensor>& v) { return avg_pool2d(v[0], k, s, p, count_include_pad); };
  };
  expect_gradcheck(avg_pool({2, 2}, {2, 2}, {0, 0}, true), {leaf({2, 2, 4, 6})});
  expect_gradcheck(avg_pool({3, 3}, {2, 2}, {1, 1}, true), {leaf({1, 2, 5, 6})});
  expect_gradcheck(avg_pool({3, 3}, {2, 2}, {1, 1}, false), {leaf({1, 2, 5, 6})});
  expect_gradcheck(avg_pool({3, 2}, {1, 2}, {1, 1}, false), {leaf({2, 1, 5, 5})});
  for (Pair out : {Pair{2, 3}, Pair{1, 1}, Pair{3, 4}}) {
    expect_gradcheck([out](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], out); },
                     {leaf({2, 2, 5, 7})});
  }
}

TEST_F(ConvPool, ConvErrors) {
  const Tensor w = zeros({16, 3, 3, 3});
  expect_error([&] { conv2d(zeros({8, 1, 28, 28}), w, Tensor()); },
               "[conv2d] expected input with 3 channels (weight of shape [16, 3, 3, 3]), "
               "got input of shape [8, 1, 28, 28]");
  expect_error([&] { conv2d(zeros({3, 28, 28}), w, Tensor()); },
               "[conv2d] expected a 4-D input [N, C, H, W], got input of shape [3, 28, 28]");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}, kInt64), w, Tensor()); },
               "[conv2d] expects a floating point tensor, got int64 of shape [1, 3, 8, 8]");
  expect_error([&] { conv2d(zeros({1, 3, 0, 8}), w, Tensor()); },
               "[conv2d] expected non-empty height and width, got input of shape [1, 3, 0, 8]");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), Tensor(), Tensor()); }, "[conv2d] weight is an undefined tensor");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), zeros({16, 3, 3}), Tensor()); },
               "[conv2d] expected a 4-D weight [OC, C, KH, KW], got weight of shape [16, 3, 3] "
               "(input of shape [1, 3, 8, 8])");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), zeros({16, 3, 3, 3}, kFloat64), Tensor()); },
               "[conv2d] expected one dtype, got input float32 and weight float64");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), w, zeros({3})); },
               "[conv2d] expected bias of shape [16] (weight of shape [16, 3, 3, 3]), got bias of shape [3]");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), w, zeros({16, 1})); }, "got bias of shape [16, 1]");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), w, zeros({16}, kFloat64)); },
               "[conv2d] expected one dtype, got input float32 and bias float64");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), w, Tensor(), {0, 1}); },
               "[conv2d] stride must be >= 1, got [0, 1] (input of shape [1, 3, 8, 8])");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), w, Tensor(), {1, 1}, {1, -1}); },
               "[conv2d] padding must be >= 0, got [1, -1]");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), w, Tensor(), {1, 1}, {0, 0}, {1, 0}); },
               "[conv2d] dilation must be >= 1, got [1, 0]");
  expect_error([&] { conv2d(zeros({1, 3, 8, 8}), zeros({16, 3, 0, 3}), Tensor()); },
               "[conv2d] kernel size must be >= 1, got [0, 3]");
  expect_error([&] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 5, 5}), Tensor(), {1, 1}, {0, 1}); },
               "[conv2d] the window [5, 5] (kernel [5, 5], dilation [1, 1]) is larger than the padded input [4, 6] "
               "(input of shape [1, 3, 4, 4], padding [0, 1]): the output would be empty");
  expect_error([&] { conv2d(zeros({1, 3, 4, 4}), w, Tensor(), {1, 1}, {0, 0}, {2, 2}); },
               "[conv2d] the window [5, 5] (kernel [3, 3], dilation [2, 2]) is larger than the padded input [4, 4]");
}

// Note [Checked size arithmetic]: huge geometry is reported with its real values, not wrapped ones.
TEST_F(ConvPool, HugeWindowArgumentsAreErrorsWithTheirRealValues) {
  constexpr int64_t kHalfMax = std::numeric_limits<int64_t>::max() / 2;
  const Tensor x = zeros({1, 3, 8, 8}), w = zeros({16, 3, 3, 3});
  expect_error([&] { conv2d(x, w, Tensor(), {1, 1}, {kHalfMax, 0}); },
               "[conv2d] padding [4611686018427387903, 0] is too large: the padded size of input of shape "
               "[1, 3, 8, 8] overflows int64");
  expect_error([&] { conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {1, int64_t{1} << 62}); },
               "[conv2d] the window (kernel [3, 3], dilation [1, 4611686018427387904]) is too large: its size "
               "overflows int64 (input of shape [1, 3, 8, 8])");
  // Each output dim fits, their product (the output plane) does not.
  expect_error([&] { conv2d(x, w, Tensor(), {1, 1}, {int64_t{1} << 31, int64_t{1} << 31}); },
               "[conv2d] shape [1, 3, 4294967302, 4294967302] is too large: 4294967302 * 4294967302 overflows int64");
  expect_error([&] { max_pool2d(x, {2, 2}, {2, 2}, {kHalfMax + 1, 0}); },
               "[max_pool2d] padding [4611686018427387904, 0] is too large");
  // Windows of 2^32 x 2^32 cells fit the padded input, but their cell count overflows.
  const int64_t big = int64_t{1} << 32;
  expect_error([&] { avg_pool2d(x, {big, big}, {1, 1}, {big / 2, big / 2}); },
               "[avg_pool2d] the window (kernel [4294967296, 4294967296], dilation [1, 1]) is too large");
  expect_error([&] { adaptive_avg_pool2d(x, {kHalfMax, 1}); },
               "[adaptive_avg_pool2d] output size [4611686018427387903, 1] is too large for input of shape "
               "[1, 3, 8, 8]: the window arithmetic overflows int64");
}

TEST_F(ConvPool, PoolErrors) {
  const Tensor x = zeros({1, 2, 4, 4});
  for (const char* op : {"max_pool2d", "avg_pool2d"}) {
    auto pool = [op](const Tensor& in, Pair k, Pair s, Pair p = {0, 0}) {
      return std::string(op) == "max_pool2d" ? max_pool2d(in, k, s, p) : avg_pool2d(in, k, s, p);
    };
    const std::string tag = std::string("[") + op + "] ";
    expect_error([&] { pool(zeros({2, 4, 4}), {2, 2}, {2, 2}); },
                 tag + "expected a 4-D input [N, C, H, W], got input of shape [2, 4, 4]");
    expect_error([&] { pool(zeros({1, 2, 4, 4}, kInt64), {2, 2}, {2, 2}); },
                 tag + "expects a floating point tensor, got int64");
    expect_error([&] { pool(x, {0, 2}, {2, 2}); }, tag + "kernel size must be >= 1, got [0, 2]");
    expect_error([&] { pool(x, {2, 2}, {2, 0}); }, tag + "stride must be >= 1, got [2, 0]");
    expect_error([&] { pool(x, {2, 2}, {2, 2}, {-1, 0}); }, tag + "padding must be >= 0, got [-1, 0]");
    expect_error([&] { pool(x, {3, 3}, {1, 1}, {2, 1}); },
                 tag + "padding [2, 1] must be at most half the kernel size [3, 3] (input of shape [1, 2, 4, 4])");
    expect_error([&] { pool(x, {5, 2}, {1, 1}); },
                 tag + "the window [5, 2] (kernel [5, 2], dilation [1, 1]) is larger than the padded input [4, 4]");
  }
  expect_error([&] { adaptive_avg_pool2d(zeros({2, 4, 4}), {1, 1}); },
               "[adaptive_avg_pool2d] expected a 4-D input [N, C, H, W], got input of shape [2, 4, 4]");
  expect_error([&] { adaptive_avg_pool2d(x, {0, 2}); },
               "[adaptive_avg_pool2d] output size must be >= 1, got [0, 2] (input of shape [1, 2, 4, 4])");
  expect_error([&] { adaptive_avg_pool2d(zeros({1, 2, 4, 0}), {1, 1}); },
               "[adaptive_avg_pool2d] expected non-empty height and width, got input of shape [1, 2, 4, 0]");
  expect_error([&] { adaptive_avg_pool2d(zeros({1, 2, 4, 4}, kUInt8), {1, 1}); },
               "[adaptive_avg_pool2d] expects a floating point tensor, got uint8");
}
