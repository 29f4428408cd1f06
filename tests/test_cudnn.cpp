// cuDNN's path against ember's own CUDA kernels, both on the GPU in one process (Note [cuDNN or
// ember's kernels] in cuda/cudnn.h), and the host-side pieces of the cuDNN path, which run on
// every machine. Part of test_cuda.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/ops.h"
#include "tests/test_helpers.h"
#include "cuda/context.h"
#include "cuda/cudnn.h"
#include "cuda/cudnn_shapes.h"

using namespace ember;

namespace {

using ember::testutil::error_of;


// Both on the CPU, same shape and dtype, every element within tol * (1 + |want|), or bitwise for 0.
void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (tol == 0.0) {
      ASSERT_EQ(g[i], w[i]) << "element " << i;
    } else {
      ASSERT_NEAR(g[i], w[i], tol * (1.0 + std::fabs(w[i]))) << "element " << i;
    }
  }
}

using Function = std::function<Tensor(const std::vector<Tensor>&)>;

// fn on CUDA copies of `inputs` with the switch at `use_cudnn`, then the backward of sum(out * r):
// the output and every input's gradient, back on the CPU.
std::vector<Tensor> run_on_gpu(bool use_cudnn, const Function& fn, const std::vector<Tensor>& inputs, const Tensor& r) {
  cuda::set_cudnn_enabled(use_cudnn);
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.to(kCUDA).requires_grad_());
  const Tensor out = fn(leaves);
  sum(out * r.to(kCUDA)).backward();
  std::vector<Tensor> results{out.detach().to(kCPU)};
  for (const Tensor& t : leaves) results.push_back(t.grad().to(kCPU));
  return results;
}

#define SKIP_UNLESS_CUDNN()                                                               \
  do {                                                                                    \
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";                          \
    if (!cuda::cudnn_active()) GTEST_SKIP() << "cuDNN not in use: " << cuda::cudnn_status(); \
  } while (0)

}  // namespace

// --- host side: every machine ---

TEST(CudnnSwitch, ParsesEmberCudnn) {
  for (const char* on : {static_cast<const char*>(nullptr), "", "1", "on", "ON", "true", "auto", "Auto"})
    EXPECT_TRUE(cuda::parse_cudnn_switch(on)) << (on ? on : "(unset)");
  for (const char* off : {"0", "off", "OFF", "false", "False"}) EXPECT_FALSE(cuda::parse_cudnn_switch(off)) << off;
  const std::string message = error_of([] { cuda::parse_cudnn_switch("2"); });
  EXPECT_NE(message.find("EMBER_CUDNN"), std::string::npos) << message;
  EXPECT_NE(message.find("'2'"), std::string::npos) << message;
}

TEST(CudnnSwitch, OverrideDecidesThePath) {
  const cuda::CudnnSwitchGuard restore(true);  // the test sets the switch as it goes
  cuda::set_cudnn_enabled(false);
  EXPECT_FALSE(cuda::cudnn_requested());
  EXPECT_FALSE(cuda::cudnn_active());
  EXPECT_EQ(cuda::cudnn_status().rfind("ember's kernels: ", 0), 0u) << cuda::cudnn_status();
  cuda::set_cudnn_enabled(true);
  EXPECT_TRUE(cuda::cudnn_requested());
  const std::string status = cuda::cudnn_status();
  EXPECT_EQ(cuda::cudnn_active(), status.rfind("cuDNN ", 0) == 0) << status;
#ifndef EMBER_WITH_CUDNN
  EXPECT_FALSE(cuda::cudnn_active());
  EXPECT_NE(status.find("built without cuDNN"), std::string::npos) << status;
#endif
}

TEST(CudnnSwitch, GuardPutsBackTheSwitch) {
  const bool before = cuda::cudnn_requested();
  {
    const cuda::CudnnSwitchGuard off(false);
    EXPECT_FALSE(cuda::cudnn_requested());
    {
      const cuda::CudnnSwitchGuard on(true);
      EXPECT_TRUE(cuda::cudnn_requested());
    }
    EXPECT_FALSE(cuda::cudnn_requested());
  }
  EXPECT_EQ(cuda::cudnn_requested(), before);
}

// scripts/gpu-check reads this line to report which path the CUDA tests ran.
TEST(CudnnSwitch, ReportsPath) {
  const std::string status = cuda::cudnn_status();
  EXPECT_FALSE(status.empty());
  std::cout << "ember cuDNN path: " << status << std::endl;
}

TEST(CudnnShapes, ConvGeometryBecomesDescriptorSizes) {
  // x [2, 3, 9, 8], weight [4, 3, 3, 2], stride (1, 2), padding (2, 0), dilation (2, 1):
  // oh = (9 + 2*2 - 2*(3-1) - 1) / 1 + 1 = 9, ow = (8 - 1*(2-1) - 1) / 2 + 1 = 4.
  kernels::Window2d g{2, 3, 9, 8, 3, 2, 1, 2, 2, 0, 2, 1, 9, 4};
  const auto s = cuda::cudnn_conv_shapes(g, 4);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->x, (std::array<int, 4>{2, 3, 9, 8}));
  EXPECT_EQ(s->weight, (std::array<int, 4>{4, 3, 3, 2}));
  EXPECT_EQ(s->out, (std::array<int, 4>{2, 4, 9, 4}));
  EXPECT_EQ(s->padding, (std::array<int, 2>{2, 0}));
  EXPECT_EQ(s->stride, (std::array<int, 2>{1, 2}));
  EXPECT_EQ(s->dilation, (std::array<int, 2>{2, 1}));
}

TEST(CudnnShapes, TensorsPastIntStayOnEmbersKernels) {
  // A pointwise convolution whose input has exactly INT_MAX elements fits; one more sample does not.
  kernels::Window2d fits{1, 1, 1, INT_MAX, 1, 1, 1, 1, 0, 0, 1, 1, 1, INT_MAX};
  EXPECT_TRUE(cuda::cudnn_conv_shapes(fits, 1).has_value());
  kernels::Window2d batch = fits;
  batch.n = 2;
  EXPECT_FALSE(cuda::cudnn_conv_shapes(batch, 1).has_value());
  // Small input, but the output (n * oc * oh * ow = 2^32) is too large.
  kernels::Window2d wide{1 << 16, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1};
  EXPECT_TRUE(cuda::cudnn_conv_shapes(wide, 1).has_value());
  EXPECT_FALSE(cuda::cudnn_conv_shapes(wide, 1 << 16).has_value());
  // A stride past INT_MAX has no descriptor either.
  kernels::Window2d strided{1, 1, 4, 4, 1, 1, int64_t{1} << 31, 1, 0, 0, 1, 1, 1, 4};
  EXPECT_FALSE(cuda::cudnn_conv_shapes(strided, 1).has_value());
}

TEST(CudnnShapes, BatchNormIsSpatialNchw) {
  EXPECT_EQ(cuda::cudnn_batch_norm_shape(6, 4, 25), (std::array<int, 4>{6, 4, 25, 1}));
  EXPECT_EQ(cuda::cudnn_batch_norm_shape(8, 3, 1), (std::array<int, 4>{8, 3, 1, 1}));  // BatchNorm1d
  EXPECT_FALSE(cuda::cudnn_batch_norm_shape(1 << 16, 1 << 8, 1 << 8).has_value());   // 2^32 elements
}

// --- need a GPU and cuDNN ---

TEST(CudnnMatchesReference, ConvForwardAndGradients) {
  SKIP_UNLESS_CUDNN();
  const cuda::CudnnSwitchGuard restore(true);  // the test sets the switch as it goes
  struct Case {
    Shape x, weight;
    Pair stride, padding, dilation;
  };
  const std::vector<Case> cases = {
      {{5, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}},      // ResNet's 3x3
      {{5, 3, 9, 8}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}},      // downsampling
      {{5, 3, 9, 8}, {4, 3, 3, 2}, {1, 2}, {2, 0}, {2, 1}},      // every pair asymmetric, dilated
      {{5, 3, 9, 8}, {4, 3, 1, 1}, {2, 2}, {0, 0}, {1, 1}},      // pointwise shortcut
      {{1, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}},  // one sample, wider
      {{3, 2, 7, 11}, {6, 2, 5, 3}, {3, 1}, {2, 1}, {1, 2}},     // non-square everything
  };
  for (const DType dtype : {kFloat32, kFloat64}) {
    for (const Case& k : cases) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " x " << shape_str(k.x) << " weight "
                                      << shape_str(k.weight));
      const std::vector<Tensor> inputs = {randn(k.x).to(dtype), randn(k.weight).to(dtype),
                                          randn({k.weight[0]}).to(dtype)};
      const Function fn = [&](const std::vector<Tensor>& v) {
        return conv2d(v[0], v[1], v[2], k.stride, k.padding, k.dilation);
      };
      const Tensor probe = conv2d(inputs[0], inputs[1], inputs[2], k.stride, k.padding, k.dilation);
      const Tensor r = randn(probe.shape()).to(dtype);
      const std::vector<Tensor> reference = run_on_gpu(false, fn, inputs, r);
      const int64_t calls = cuda::cudnn_calls();
      const std::vector<Tensor> with_cudnn = run_on_gpu(true, fn, inputs, r);
      // float32 always has a deterministic FMA algorithm in each direction; float64 may not.
      if (dtype == kFloat32) {
        EXPECT_EQ(cuda::cudnn_calls() - calls, 3) << "forward, data and weight gradients";
      }
      const double tol = dtype == kFloat32 ? 1e-4 : 1e-10;
      const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
      for (size_t i = 0; i < reference.size(); ++i) expect_close(with_cudnn[i], reference[i], tol, names[i]);
      // Note [Deterministic cuDNN algorithms]: a second run repeats every bit.
      const std::vector<Tensor> again = run_on_gpu(true, fn, inputs, r);
      for (size_t i = 0; i < again.size(); ++i) expect_close(again[i], with_cudnn[i], 0.0, names[i]);
    }
  }
}

TEST(CudnnMatchesReference, BatchNormTrainEvalBackward) {
  SKIP_UNLESS_CUDNN();
  const cuda::CudnnSwitchGuard restore(true);  // the test sets the switch as it goes
  const double momentum = 0.3, eps = 1e-3;
  for (const Shape& shape : {Shape{6, 4, 5, 5}, Shape{8, 3}}) {
    for (const bool affine : {true, false}) {
      SCOPED_TRACE(testing::Message() << shape_str(shape) << (affine ? " affine" : " no affine"));
      const int64_t c = shape[1];
      const Tensor x = randn(shape) * 3.0 + 1.0;
      const std::vector<Tensor> inputs =
          affine ? std::vector<Tensor>{x, randn({c}), randn({c})} : std::vector<Tensor>{x};
      const Tensor r = randn(shape);
      // Running statistics per path, starting from the same values.
      const Tensor start_mean = randn({c}), start_var = rand({c}) + 0.5;
      auto run_path = [&](bool use_cudnn, Tensor& running_mean, Tensor& running_var) {
        running_mean = start_mean.to(kCUDA);
        running_var = start_var.to(kCUDA);
        const Function fn = [&](const std::vector<Tensor>& v) {
          return batch_norm(v[0], running_mean, running_var, affine ? v[1] : Tensor(), affine ? v[2] : Tensor(),
                            true, momentum, eps);
        };
        return run_on_gpu(use_cudnn, fn, inputs, r);
      };
      Tensor ref_mean, ref_var, dnn_mean, dnn_var;
      const std::vector<Tensor> reference = run_path(false, ref_mean, ref_var);
      const int64_t calls = cuda::cudnn_calls();
      const std::vector<Tensor> with_cudnn = run_path(true, dnn_mean, dnn_var);
      EXPECT_EQ(cuda::cudnn_calls() - calls, 1) << "the backward";
      expect_close(with_cudnn[0], reference[0], 0.0, "training output (ember's forward on both paths)");
      const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
      for (size_t i = 1; i < reference.size(); ++i) expect_close(with_cudnn[i], reference[i], 1e-5, names[i]);

      // The running statistics: PyTorch's update with the unbiased batch variance, on both paths.
      const int64_t per_channel = x.numel() / c;
      const Tensor xs = x.reshape({shape[0], c, per_channel / shape[0]});
      const std::vector<double> values = xs.to_vector<double>();
      std::vector<double> want_mean(static_cast<size_t>(c)), want_var(static_cast<size_t>(c));
      const std::vector<double> m0 = start_mean.to_vector<double>(), v0 = start_var.to_vector<double>();
      for (int64_t ch = 0; ch < c; ++ch) {
        double total = 0.0, sq = 0.0;
        const int64_t s = per_channel / shape[0];
        for (int64_t n = 0; n < shape[0]; ++n)
          for (int64_t j = 0; j < s; ++j) total += values[static_cast<size_t>((n * c + ch) * s + j)];
        const double mu = total / static_cast<double>(per_channel);
        for (int64_t n = 0; n < shape[0]; ++n)
          for (int64_t j = 0; j < s; ++j) {
            const double d = values[static_cast<size_t>((n * c + ch) * s + j)] - mu;
            sq += d * d;
          }
        want_mean[static_cast<size_t>(ch)] = (1 - momentum) * m0[static_cast<size_t>(ch)] + momentum * mu;
        want_var[static_cast<size_t>(ch)] =
            (1 - momentum) * v0[static_cast<size_t>(ch)] + momentum * sq / static_cast<double>(per_channel - 1);
      }
      const Tensor expected_mean = from_vector(want_mean, {c}).to(kFloat32);
      const Tensor expected_var = from_vector(want_var, {c}).to(kFloat32);
      expect_close(dnn_mean.to(kCPU), ref_mean.to(kCPU), 0.0, "running mean, both paths");
      expect_close(dnn_var.to(kCPU), ref_var.to(kCPU), 0.0, "running var, both paths");
      expect_close(dnn_mean.to(kCPU), expected_mean, 1e-5, "running mean");
      expect_close(dnn_var.to(kCPU), expected_var, 1e-5, "running var (unbiased)");

      // Evaluation mode normalises with those running statistics.
      cuda::set_cudnn_enabled(true);
      const Tensor weight = affine ? inputs[1].to(kCUDA) : Tensor(), bias = affine ? inputs[2].to(kCUDA) : Tensor();
      const Tensor eval = batch_norm(x.to(kCUDA), dnn_mean, dnn_var, weight, bias, false, momentum, eps).to(kCPU);
      const Tensor scale = rsqrt(expected_var + eps).reshape(shape.size() == 4 ? Shape{1, c, 1, 1} : Shape{1, c});
      Tensor want = (x - expected_mean.reshape(scale.shape())) * scale;
      if (affine) want = want * inputs[1].reshape(scale.shape()) + inputs[2].reshape(scale.shape());
      expect_close(eval, want, 1e-5, "evaluation output");
    }
  }
}
