// cuDNN's path against ember's own CUDA kernels, both on the GPU in one process (Note [cuDNN or
// ember's kernels] in cuda/cudnn/api.h), and the host-side pieces of the cuDNN path, which run on
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
#include "cuda/cudnn/api.h"
#include "cuda/cudnn/shapes.h"

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
  using cuda::BatchNormPass;
  const auto shape = [](int64_t n, int64_t c, int64_t s, BatchNormPass pass) {
    return cuda::cudnn_batch_norm_shape(n, c, s, pass);
  };
  EXPECT_EQ(shape(6, 4, 25, BatchNormPass::Training), (std::array<int, 4>{6, 4, 25, 1}));
  EXPECT_EQ(shape(8, 3, 1, BatchNormPass::Inference), (std::array<int, 4>{8, 3, 1, 1}));  // BatchNorm1d
  EXPECT_FALSE(shape(1 << 12, 1 << 10, 1 << 10, BatchNormPass::Training).has_value());   // 2^32 elements
  // The largest batches cuDNN serves, one sample more, and an empty x.
  EXPECT_TRUE(shape(cuda::kCudnnBatchNormMaxTrainingBatch, 2, 1, BatchNormPass::Training).has_value());
  EXPECT_FALSE(shape(cuda::kCudnnBatchNormMaxTrainingBatch + 1, 2, 1, BatchNormPass::Training).has_value());
  EXPECT_TRUE(shape(cuda::kCudnnBatchNormMaxInferenceBatch, 2, 1, BatchNormPass::Inference).has_value());
  EXPECT_FALSE(shape(cuda::kCudnnBatchNormMaxInferenceBatch + 1, 2, 1, BatchNormPass::Inference).has_value());
  EXPECT_TRUE(shape(cuda::kCudnnBatchNormMaxInferenceBatch + 1, 2, 1, BatchNormPass::Training).has_value());
  EXPECT_FALSE(shape(0, 3, 4, BatchNormPass::Inference).has_value());
  EXPECT_FALSE(shape(2, 3, 0, BatchNormPass::Inference).has_value());
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

// --- batch norm (Notes [cuDNN's batch-norm forward] and [cuDNN's batch-norm backward]) ---

namespace {

// x [n, c, ...] seen as [n, c, s].
struct BatchNormLayout {
  int64_t n, c, s;
};
BatchNormLayout layout_of(const Shape& shape) {
  int64_t s = 1;
  for (size_t d = 2; d < shape.size(); ++d) s *= shape[d];
  return {shape[0], shape[1], s};
}

// Each channel's mean and biased variance, in double on the CPU.
struct Moments {
  std::vector<double> mean, var;
  double count;
};
Moments moments_of(const Tensor& x) {
  const BatchNormLayout l = layout_of(x.shape());
  const std::vector<double> v = x.to_vector<double>();
  Moments m{std::vector<double>(static_cast<size_t>(l.c)), std::vector<double>(static_cast<size_t>(l.c)),
            static_cast<double>(l.n * l.s)};
  const auto at = [&](int64_t i, int64_t ch, int64_t j) { return v[static_cast<size_t>((i * l.c + ch) * l.s + j)]; };
  for (int64_t ch = 0; ch < l.c; ++ch) {
    double total = 0.0, sq = 0.0;
    for (int64_t i = 0; i < l.n; ++i)
      for (int64_t j = 0; j < l.s; ++j) total += at(i, ch, j);
    const double mu = total / m.count;
    for (int64_t i = 0; i < l.n; ++i)
      for (int64_t j = 0; j < l.s; ++j) sq += (at(i, ch, j) - mu) * (at(i, ch, j) - mu);
    m.mean[static_cast<size_t>(ch)] = mu;
    m.var[static_cast<size_t>(ch)] = sq / m.count;
  }
  return m;
}

// PyTorch's running update after a batch x (Note [BatchNorm running statistics]): the unbiased
// variance goes into running_var.
void expect_running_update(const Tensor& x, const Tensor& start_mean, const Tensor& start_var, double momentum,
                           const Tensor& got_mean, const Tensor& got_var) {
  const Moments m = moments_of(x);
  std::vector<double> mean = start_mean.to_vector<double>(), var = start_var.to_vector<double>();
  for (size_t ch = 0; ch < mean.size(); ++ch) {
    mean[ch] = (1 - momentum) * mean[ch] + momentum * m.mean[ch];
    var[ch] = (1 - momentum) * var[ch] + momentum * m.var[ch] * m.count / (m.count - 1);
  }
  const Shape c{static_cast<int64_t>(mean.size())};
  expect_close(got_mean, from_vector(mean, c).to(kFloat32), 1e-5, "running mean, PyTorch's update");
  expect_close(got_var, from_vector(var, c).to(kFloat32), 1e-5, "running var, PyTorch's update (unbiased)");
}

// The training forward slot on CUDA with the switch at `use_cudnn`: its output, the mean and invstd
// it saves for the backward, and the running statistics it moved from `start_*` (undefined: none).
struct TrainingForward {
  Tensor out, mean, invstd, running_mean, running_var;
};
TrainingForward training_forward_on_gpu(bool use_cudnn, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                        double eps, const Tensor& start_mean, const Tensor& start_var,
                                        double momentum) {
  cuda::set_cudnn_enabled(use_cudnn);
  const BatchNormLayout l = layout_of(x.shape());
  const auto on_gpu = [](const Tensor& t) { return t.defined() ? t.to(kCUDA) : t; };
  const kernels::BatchNormRunning running{on_gpu(start_mean), on_gpu(start_var), momentum};
  const TensorOptions options = TensorOptions(kFloat32).with_device(kCUDA);
  const Tensor out = empty(x.shape(), options), mean = empty({l.c}, options), invstd = empty({l.c}, options);
  kernels::batch_norm_train_forward[kCUDA](x.to(kCUDA), l.n, l.c, l.s, on_gpu(weight), on_gpu(bias), eps, running,
                                           out, mean, invstd);
  const auto on_cpu = [](const Tensor& t) { return t.defined() ? t.to(kCPU) : t; };
  return {out.to(kCPU), mean.to(kCPU), invstd.to(kCPU), on_cpu(running.mean), on_cpu(running.var)};
}

// Shapes with one sample, two values per channel (the fewest training allows), BatchNorm1d's 2-d
// and 3-d inputs, and a channel long enough for ember's kernels to split it.
const std::vector<Shape> kBatchNormShapes = {{6, 4, 5, 5}, {8, 3}, {2, 3}, {1, 3, 1, 2}, {3, 2, 7}, {9, 3, 37, 41}};

}  // namespace

TEST(CudnnMatchesReference, BatchNormTrainingForward) {
  SKIP_UNLESS_CUDNN();
  const cuda::CudnnSwitchGuard restore(true);  // the test sets the switch as it goes
  for (const Shape& shape : kBatchNormShapes) {
    for (const bool affine : {true, false}) {
      // eps 1e-12 is below what older cuDNN took (CUDNN_BN_MIN_EPSILON was 1e-5); cuDNN 9's minimum is 0.
      for (const double eps : {1e-3, 1e-12}) {
        SCOPED_TRACE(testing::Message() << shape_str(shape) << (affine ? " affine" : " no affine") << " eps " << eps);
        const int64_t c = shape[1];
        const Tensor x = randn(shape) * 3.0 + 1.0;
        const Tensor weight = affine ? randn({c}) : Tensor(), bias = affine ? randn({c}) : Tensor();
        const Tensor start_mean = randn({c}), start_var = rand({c}) + 0.5;
        const double momentum = 0.3;
        const TrainingForward reference =
            training_forward_on_gpu(false, x, weight, bias, eps, start_mean, start_var, momentum);
        const int64_t calls = cuda::cudnn_calls();
        const TrainingForward dnn = training_forward_on_gpu(true, x, weight, bias, eps, start_mean, start_var, momentum);
        EXPECT_EQ(cuda::cudnn_calls() - calls, 1) << "cuDNN served the forward";
        expect_close(dnn.out, reference.out, 1e-5, "output");
        expect_close(dnn.mean, reference.mean, 1e-5, "saved mean");
        expect_close(dnn.invstd, reference.invstd, 1e-5, "saved invstd");
        // What every backward slot takes: the batch mean and 1 / sqrt(biased var + eps), not an
        // inverse variance.
        const Moments m = moments_of(x);
        std::vector<double> invstd(m.var.size());
        for (size_t ch = 0; ch < invstd.size(); ++ch) invstd[ch] = 1.0 / std::sqrt(m.var[ch] + eps);
        expect_close(dnn.mean, from_vector(m.mean, {c}).to(kFloat32), 1e-5, "saved mean, exact");
        expect_close(dnn.invstd, from_vector(invstd, {c}).to(kFloat32), 1e-5, "saved invstd, exact");
        expect_close(dnn.running_mean, reference.running_mean, 1e-5, "running mean, both paths");
        expect_close(dnn.running_var, reference.running_var, 1e-5, "running var, both paths");
        expect_running_update(x, start_mean, start_var, momentum, dnn.running_mean, dnn.running_var);
        // A second run repeats every bit (a training run repeats bitwise on either path).
        const TrainingForward again = training_forward_on_gpu(true, x, weight, bias, eps, start_mean, start_var, momentum);
        expect_close(again.out, dnn.out, 0.0, "output, second run");
        expect_close(again.invstd, dnn.invstd, 0.0, "invstd, second run");
        expect_close(again.running_var, dnn.running_var, 0.0, "running var, second run");
        // Without running statistics (momentum is then unused) the rest is the same.
        const TrainingForward plain = training_forward_on_gpu(true, x, weight, bias, eps, Tensor(), Tensor(), 0.0);
        expect_close(plain.out, reference.out, 1e-5, "output without running statistics");
        expect_close(plain.invstd, reference.invstd, 1e-5, "invstd without running statistics");
      }
    }
  }
}

TEST(CudnnMatchesReference, BatchNormTrainingSteps) {
  SKIP_UNLESS_CUDNN();
  const cuda::CudnnSwitchGuard restore(true);  // the test sets the switch as it goes
  const double eps = 1e-5;
  for (const Shape& shape : kBatchNormShapes) {
    for (const double momentum : {0.1, 1.0}) {
      SCOPED_TRACE(testing::Message() << shape_str(shape) << " momentum " << momentum);
      const int64_t c = shape[1];
      const std::vector<Tensor> params = {randn({c}), randn({c})};
      const Tensor start_mean = randn({c}), start_var = rand({c}) + 0.5;
      Tensor mean[2] = {start_mean.to(kCUDA), start_mean.to(kCUDA)}, var[2] = {start_var.to(kCUDA), start_var.to(kCUDA)};
      for (int step = 0; step < 3; ++step) {
        SCOPED_TRACE(testing::Message() << "step " << step);
        const std::vector<Tensor> inputs = {randn(shape) * (step + 1.0) + step, params[0], params[1]};
        const Tensor r = randn(shape), before_mean = mean[1].to(kCPU), before_var = var[1].to(kCPU);
        std::vector<Tensor> results[2];
        for (const int path : {0, 1}) {  // ember's kernels, then cuDNN
          const int64_t calls = cuda::cudnn_calls();
          const Function fn = [&](const std::vector<Tensor>& v) {
            return batch_norm(v[0], mean[path], var[path], v[1], v[2], true, momentum, eps);
          };
          results[path] = run_on_gpu(path == 1, fn, inputs, r);
          EXPECT_EQ(cuda::cudnn_calls() - calls, path == 1 ? 2 : 0) << "the forward and the backward";
        }
        const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
        for (size_t i = 0; i < results[0].size(); ++i) expect_close(results[1][i], results[0][i], 1e-5, names[i]);
        expect_close(mean[1].to(kCPU), mean[0].to(kCPU), 1e-5, "running mean, both paths");
        expect_close(var[1].to(kCPU), var[0].to(kCPU), 1e-5, "running var, both paths");
        expect_running_update(inputs[0], before_mean, before_var, momentum, mean[1].to(kCPU), var[1].to(kCPU));
      }
    }
  }
}

TEST(CudnnMatchesReference, BatchNormEvalForwardAndGradients) {
  SKIP_UNLESS_CUDNN();
  const cuda::CudnnSwitchGuard restore(true);  // the test sets the switch as it goes
  const double eps = 1e-3;
  // Evaluation takes one value per channel too ([1, c, 1, 1], [1, c]).
  std::vector<Shape> shapes = kBatchNormShapes;
  shapes.push_back({1, 5, 1, 1});
  shapes.push_back({1, 5});
  for (const Shape& shape : shapes) {
    for (const bool affine : {true, false}) {
      SCOPED_TRACE(testing::Message() << shape_str(shape) << (affine ? " affine" : " no affine"));
      const int64_t c = shape[1];
      const Tensor x = randn(shape) * 3.0 + 1.0;
      const std::vector<Tensor> inputs =
          affine ? std::vector<Tensor>{x, randn({c}), randn({c})} : std::vector<Tensor>{x};
      const Tensor running_mean = randn({c}), running_var = rand({c}) + 0.5, r = randn(shape);
      const Function fn = [&](const std::vector<Tensor>& v) {
        return batch_norm(v[0], running_mean.to(kCUDA), running_var.to(kCUDA), affine ? v[1] : Tensor(),
                          affine ? v[2] : Tensor(), false, 0.1, eps);
      };
      const std::vector<Tensor> reference = run_on_gpu(false, fn, inputs, r);
      const int64_t calls = cuda::cudnn_calls();
      const std::vector<Tensor> with_cudnn = run_on_gpu(true, fn, inputs, r);
      EXPECT_EQ(cuda::cudnn_calls() - calls, 1) << "the forward (the backward is ordinary ops)";
      const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
      for (size_t i = 0; i < reference.size(); ++i) expect_close(with_cudnn[i], reference[i], 1e-5, names[i]);
      Shape channel_shape(shape.size(), 1);  // [1, c, 1, ...]: broadcasts over x
      channel_shape[1] = c;
      const auto channels = [&](const Tensor& v) { return v.reshape(channel_shape); };
      Tensor want = (x - channels(running_mean)) * channels(rsqrt(running_var + eps));
      if (affine) want = want * channels(inputs[1]) + channels(inputs[2]);
      expect_close(with_cudnn[0], want, 1e-5, "output, the formula");
    }
  }
}

TEST(CudnnMatchesReference, BatchNormOneValuePerChannelRaisesOnBothPaths) {
  SKIP_UNLESS_CUDNN();
  const cuda::CudnnSwitchGuard restore(true);  // the test sets the switch as it goes
  for (const bool use_cudnn : {false, true}) {
    cuda::set_cudnn_enabled(use_cudnn);
    for (const Shape& shape : {Shape{1, 3, 1, 1}, Shape{1, 3}}) {
      SCOPED_TRACE(testing::Message() << shape_str(shape) << (use_cudnn ? " cuDNN" : " ember's kernels"));
      const Tensor x = randn(shape).to(kCUDA), mean = zeros({3}).to(kCUDA), var = ones({3}).to(kCUDA);
      const int64_t calls = cuda::cudnn_calls();
      const std::string message = error_of([&] { batch_norm(x, mean, var, Tensor(), Tensor(), true); });
      EXPECT_NE(message.find("[batch_norm] expected more than 1 value per channel when training, got input of shape " +
                             shape_str(shape)),
                std::string::npos)
          << message;
      EXPECT_EQ(cuda::cudnn_calls(), calls) << "raised before any kernel";
      expect_close(mean.to(kCPU), zeros({3}), 0.0, "running mean untouched");
      expect_close(var.to(kCPU), ones({3}), 0.0, "running var untouched");
    }
  }
}

TEST(CudnnMatchesReference, BatchNormDeclinesToEmbersKernels) {
  SKIP_UNLESS_CUDNN();
  const cuda::CudnnSwitchGuard restore(true);
  struct Case {
    const char* what;
    Shape shape;
    DType dtype;
    bool training, strided_running;
  };
  const std::vector<Case> cases = {
      {"float64", {6, 4, 5, 5}, kFloat64, true, false},
      {"float64 evaluation", {6, 4, 5, 5}, kFloat64, false, false},
      {"a batch past cuDNN's training limit", {cuda::kCudnnBatchNormMaxTrainingBatch + 1, 2}, kFloat32, true, false},
      {"a batch past cuDNN's inference limit", {cuda::kCudnnBatchNormMaxInferenceBatch + 1, 2}, kFloat32, false, false},
      {"running statistics with gaps", {6, 4, 5, 5}, kFloat32, true, true},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const int64_t c = k.shape[1];
    const Tensor x = (randn(k.shape) * 2.0 + 0.5).to(k.dtype), weight = randn({c}).to(k.dtype);
    // A running statistic with gaps: every other element of a [2c] vector.
    const auto running = [&](const Tensor& v) {
      if (!k.strided_running) return v.to(k.dtype).to(kCUDA);
      return stack({v, zeros({c})}, 1).to(k.dtype).to(kCUDA).select(1, 0);
    };
    const Tensor start_mean = randn({c}), start_var = rand({c}) + 0.5;
    const Tensor mean = running(start_mean), var = running(start_var);
    const int64_t calls = cuda::cudnn_calls();
    const Tensor got = batch_norm(x.to(kCUDA), mean, var, weight.to(kCUDA), Tensor(), k.training, 0.2, 1e-4).to(kCPU);
    EXPECT_EQ(cuda::cudnn_calls(), calls) << "ember's kernels ran";
    const Tensor cpu_mean = start_mean.to(k.dtype), cpu_var = start_var.to(k.dtype);
    const Tensor want = batch_norm(x, cpu_mean, cpu_var, weight, Tensor(), k.training, 0.2, 1e-4);
    const double tol = k.dtype == kFloat32 ? 1e-5 : 1e-10;
    expect_close(got, want, tol, "output, as on the CPU");
    expect_close(mean.to(kCPU), cpu_mean, tol, "running mean, as on the CPU");
    expect_close(var.to(kCPU), cpu_var, tol, "running var, as on the CPU");
  }
}
