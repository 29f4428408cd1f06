// The CUDA backend, checked against the CPU backend: every test computes the same thing on both
// devices and compares. Tests skip when no CUDA device is present, except the ones that check
// that a machine without a GPU gets clear errors instead of crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/grad_unscale.h"
#include "core/kernels.h"
#include "core/memory_limit.h"
#include "core/ops.h"
#include "cuda/bad_index.h"
#include "cuda/context.h"
#include "cuda/cudnn/api.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adamw.h"
#include "optim/grad_scaler.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "tests/batch_norm_moments.h"
#include "tests/memory_limit_check.h"
#include "tests/op_table.h"
#include "tests/test_helpers.h"

using namespace ember;

namespace {

using ember::testutil::error_of;
using ember::testutil::expect_error;

// Same shape and dtype, the CUDA tensor on a CUDA device, and every element within
// `tol * (1 + |expected|)` (exactly equal for tol = 0; NaNs must match NaNs, and an infinity the
// same infinity).
void expect_matches(const Tensor& cuda_result, const Tensor& cpu_result, double tol = 0.0) {
  ASSERT_TRUE(cuda_result.device().is_cuda());
  ASSERT_TRUE(cpu_result.device().is_cpu());
  ASSERT_EQ(cuda_result.shape(), cpu_result.shape());
  ASSERT_EQ(cuda_result.dtype(), cpu_result.dtype());
  const std::vector<double> got = cuda_result.to_vector<double>(), want = cpu_result.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": got " << got[i] << ", want nan";
    } else if (tol == 0.0 || std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << "element " << i;
    }
  }
}


const DType kAllDTypes[] = {kFloat32, kFloat64, kInt64, kUInt8};

// A CPU tensor with distinct values that every dtype holds exactly (0..numel-1, mod 200).
Tensor sample(const Shape& shape, DType dtype) {
  const int64_t n = numel_of(shape);
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<double>((i * 7) % 200);
  return from_vector(values, shape, dtype);
}

}  // namespace

// --- runs on every machine ---

TEST(CudaContext, AvailabilityQueryNeverCrashes) {
  const bool available = cuda::is_available();  // must return, GPU or not
  EXPECT_EQ(available, cuda::device_count() > 0);
  if (!available) {
    EXPECT_NE(error_of([] { zeros({2}, kCUDA); }).find("no CUDA device"), std::string::npos);
    EXPECT_NE(error_of([] { ones({2}).to(kCUDA); }).find("no CUDA device"), std::string::npos);
    EXPECT_THROW(cuda::stream(0), Error);
  }
}

TEST(CudaContext, KernelsAreRegistered) {
  // Static registrars ran (the archive is linked whole) without touching the CUDA runtime.
  EXPECT_TRUE(kernels::fill.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::copy.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::transfer.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::unary.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::binary.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::matmul.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::random.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::reduce.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::argmax.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::softmax.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::cross_entropy_forward.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::cross_entropy_backward.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::conv2d_forward.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::max_pool2d_backward.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::batch_norm_backward.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::batch_norm_train_forward.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::batch_norm_eval_forward.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::class_targets.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::where.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::index_select.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::scatter_add.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::fingerprint.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::cumsum.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::sort.has(DeviceType::CUDA));
  EXPECT_TRUE(kernels::optimizer_step.has(DeviceType::CUDA));
}

TEST(CudaContext, BadIndexMessagesNameTheOp) {
  // The records a kernel leaves (Note [Index errors found on the device]), worded as on the CPU.
  using cuda::IndexCheck;
  const auto message = [](IndexCheck check, int64_t value, int64_t size) {
    return cuda::describe({1, static_cast<int32_t>(check), value, size});
  };
  EXPECT_EQ(message(IndexCheck::CrossEntropyTarget, 7, 5).rfind("[cross_entropy] target 7 is out of range for 5 classes (", 0), 0u);
  EXPECT_EQ(message(IndexCheck::NllLossTarget, -3, 5).rfind("[nll_loss] target -3 is out of range for 5 classes (", 0), 0u);
  EXPECT_EQ(message(IndexCheck::IndexSelect, -2, 4).rfind("[index_select] index -2 is out of range for the indexed dim of size 4", 0), 0u);
  EXPECT_EQ(message(IndexCheck::Gather, 9, 3).rfind("[gather] index 9 is out of range", 0), 0u);
  EXPECT_EQ(message(IndexCheck::Embedding, 12, 10).rfind("[embedding] id 12 is out of range for a table of 10 embeddings", 0), 0u);
  EXPECT_NE(message(IndexCheck::Gather, 9, 3).find("found on the CUDA device"), std::string::npos);
}

TEST(CudaContext, MissingDeviceIsAnError) {
  const Device missing(DeviceType::CUDA, cuda::device_count());  // one past the last device
  EXPECT_NE(error_of([&] { zeros({2}, missing); }).find("cannot use " + missing.str()), std::string::npos);
}

TEST(CudaContext, FailedCallThrowsEmberError) {
  // An absurd device index makes cudaSetDevice (or, without a driver, cudaGetDevice) fail.
  const std::string message = error_of([] { cuda::DeviceGuard guard(1 << 20); });
  EXPECT_NE(message.find("[cuda] cuda"), std::string::npos) << message;
  EXPECT_NE(message.find("context.cpp:"), std::string::npos) << "file:line of the failed call: " << message;
  if (cuda::is_available()) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed call's error was cleared";
  }
}

// --- need a GPU ---

TEST(Cuda, Fill) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_matches(full({3, 5}, 7.0, TensorOptions(dtype).with_device(kCUDA)), full({3, 5}, 7.0, dtype));
    // Through a strided view (fill_ writes into views).
    Tensor on_gpu = zeros({4, 6}, TensorOptions(dtype).with_device(kCUDA)), on_cpu = zeros({4, 6}, dtype);
    on_gpu.slice(1, 1, 6, 2).fill_(3.0);
    on_cpu.slice(1, 1, 6, 2).fill_(3.0);
    expect_matches(on_gpu, on_cpu);
  }
}

TEST(Cuda, RoundTripEveryDType) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = sample({3, 4, 5}, dtype);
    Tensor on_gpu = x.to(kCUDA);
    EXPECT_TRUE(on_gpu.device().is_cuda());
    EXPECT_EQ(on_gpu.dtype(), dtype);
    expect_matches(on_gpu, x);
    Tensor back = on_gpu.to(kCPU);
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(back.to_vector<double>(), x.to_vector<double>());
    // A non-contiguous source goes through contiguous() first.
    expect_matches(x.transpose(0, 2).to(kCUDA), x.transpose(0, 2).contiguous());
  }
}

TEST(Cuda, StagedUploadsSurviveTheirSourceBeingOverwritten) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Host -> device copies return before the device has read anything (Note [Staged host-to-device
  // copies]): the source is overwritten right away, and busy staging buffers must not be reused.
  // The uploads queue behind a long matmul chain so that many are in flight at once.
  Tensor busy = randn({512, 512}).to(kCUDA);
  for (int i = 0; i < 20; ++i) busy = matmul(busy, busy) * 1e-3;
  std::vector<Tensor> uploaded;
  Tensor host = empty({3, 1000}, kFloat64);
  for (int i = 0; i < 40; ++i) {
    host.fill_(static_cast<double>(i));
    uploaded.push_back(host.to(kCUDA));
    uploaded.push_back(host.narrow(1, 0, 7).to(kCUDA));  // another staging size class
  }
  host.fill_(-1.0);
  const Tensor big = full({(int64_t{64} << 20) / 8 + 1}, 5.0, kFloat64);  // past the staged size: waits
  const Tensor gbig = big.to(kCUDA);
  for (int i = 0; i < 40; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(min(uploaded[2 * i]).item(), i);
    EXPECT_EQ(max(uploaded[2 * i]).item(), i);
    EXPECT_EQ(sum(uploaded[2 * i + 1]).item(), 21.0 * i);
  }
  EXPECT_EQ(min(gbig).item(), 5.0);
  EXPECT_TRUE(std::isfinite(sum(busy).item()));
}

TEST(Cuda, CopyAndCastNonContiguous) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType from : kAllDTypes) {
    Tensor x = sample({2, 3, 4}, from);
    Tensor t_cpu = x.permute({2, 0, 1}), t_gpu = x.to(kCUDA).permute({2, 0, 1});
    SCOPED_TRACE(dtype_name(from));
    expect_matches(t_gpu.contiguous(), t_cpu.contiguous());
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(dtype_name(to));
      expect_matches(t_gpu.to(to), t_cpu.to(to));
    }
    // copy_ into a strided destination, broadcasting the source.
    Tensor dst_gpu = zeros({4, 6}, TensorOptions(from).with_device(kCUDA)), dst_cpu = zeros({4, 6}, from);
    Tensor row = sample({3}, from);
    dst_gpu.slice(1, 0, 6, 2).copy_(row.to(kCUDA));
    dst_cpu.slice(1, 0, 6, 2).copy_(row);
    expect_matches(dst_gpu, dst_cpu);
  }
}

TEST(Cuda, TooManyDimsIsAClearError) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Reversing the dims of a 9-d tensor leaves no two dims that can be merged.
  Tensor x = zeros(Shape(9, 2), TensorOptions(kFloat32).with_device(kCUDA));
  const std::string message = error_of([&] { x.permute({8, 7, 6, 5, 4, 3, 2, 1, 0}).contiguous(); });
  EXPECT_NE(message.find("[copy] the CUDA kernel handles at most 8 dims"), std::string::npos) << message;
  // Nine dims that merge are fine.
  expect_matches(ones(Shape(9, 2), TensorOptions(kFloat32).with_device(kCUDA)) * 2.0, full(Shape(9, 2), 2.0));
}

TEST(Cuda, BroadcastingBinaryOps) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Tensor a = randn({4, 1, 3}), b = randn({5, 1});
  Tensor ga = a.to(kCUDA), gb = b.to(kCUDA);
  expect_matches(ga + gb, a + b, 1e-6);
  expect_matches(ga * gb, a * b, 1e-6);
  expect_matches(relu(ga * gb - 0.1), relu(a * b - 0.1), 1e-6);
  expect_matches(ga.transpose(0, 2) * gb.t().unsqueeze(-1), a.transpose(0, 2) * b.t().unsqueeze(-1), 1e-6);
  expect_matches(ga > gb, a > b);  // uint8 mask
  expect_matches(ga.to(kInt64) * 3.0, a.to(kInt64) * 3.0);
  // In place through a transposed view, with a broadcast operand.
  Tensor m = randn({3, 4}), bias = randn({3});
  Tensor gm = m.to(kCUDA);
  gm.t().add_(bias.to(kCUDA), 2.0);
  m.t().add_(bias, 2.0);
  expect_matches(gm, m, 1e-6);
  gm.mul_(0.5);
  m.mul_(0.5);
  expect_matches(gm, m, 1e-6);
}

TEST(Cuda, WhereBroadcastsLikeCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Tensor a = randn({4, 1, 3}), b = randn({5, 1}), cond = randn({5, 3}) > 0.0;
  expect_matches(where(cond.to(kCUDA), a.to(kCUDA), b.to(kCUDA)), where(cond, a, b));
  // leaky_relu's backward goes through where.
  Tensor x = randn({6, 7}).requires_grad_(), gx = x.detach().to(kCUDA).requires_grad_();
  sum(leaky_relu(x, 0.2)).backward();
  sum(leaky_relu(gx, 0.2)).backward();
  expect_matches(gx.grad(), x.grad());
}

TEST(Cuda, SmallIntegerResultsWrapLikeCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Both devices convert with core/convert.h (Note [Float to integer conversion]): into uint8
  // through a saturating int64, so both give PyTorch's wrap-around.
  Tensor x = from_vector(std::vector<double>{0, 1, 3, 200, 255}, {5}, kUInt8);
  Tensor gx = x.to(kCUDA);
  Tensor one = ones({5}, kUInt8);
  expect_matches(-gx, -x);                                  // unary
  expect_matches(sub(gx, one.to(kCUDA)), sub(x, one));      // binary: 0 - 1 = 255
  expect_matches(gx * 2.0, x * 2.0);                        // 200 * 2 = 144
  Tensor f = from_vector(std::vector<double>{-1, -3, 256, 300.5}, {4}, kFloat32);
  expect_matches(f.to(kCUDA).to(kUInt8), f.to(kUInt8));     // copy with a cast
}

TEST(Cuda, FloatToIntegerEdgeCasesMatchCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const double inf = INFINITY;
  const Tensor edges = from_vector(std::vector<double>{NAN, inf, -inf, 0x1p63, -0x1p63, 1e300, -2.9, 300.5}, {8});
  for (DType from : {kFloat32, kFloat64}) {
    for (DType to : {kInt64, kUInt8}) {
      SCOPED_TRACE(testing::Message() << from << " -> " << to);
      const Tensor x = edges.to(from);
      expect_matches(x.to(kCUDA).to(to), x.to(to));
      // full() refuses NaN for an integer dtype on both devices (check_fill_value); the fill
      // kernel itself converts it by the same rule on both.
      expect_error([&] { full({3}, NAN, TensorOptions(to).with_device(kCUDA)); },
                   std::string("[full] value nan cannot be converted to ") + dtype_name(to));
      const Tensor on_gpu = empty({3}, TensorOptions(to).with_device(kCUDA)), on_cpu = empty({3}, to);
      kernels::fill[kCUDA](on_gpu, NAN);
      kernels::fill[kCPU](on_cpu, NAN);
      expect_matches(on_gpu, on_cpu);
    }
  }
}

TEST(Cuda, BadIndicesAreRaisedAtTheNextSynchronisation) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Note [Index errors found on the device]: the call returns, the next wait for the device
  // raises the CPU's message once, and the device stays usable.
  const Tensor logits = randn({3, 5}).to(kCUDA);
  const Tensor loss = cross_entropy(logits, from_vector({1, 7, -100}, {3}, kInt64).to(kCUDA));
  std::string message = error_of([&] { loss.item(); });
  EXPECT_NE(message.find("[cross_entropy] target 7 is out of range for 5 classes"), std::string::npos) << message;
  EXPECT_NE(message.find("raised at the next synchronisation"), std::string::npos) << message;
  EXPECT_TRUE(std::isfinite(cross_entropy(logits, from_vector({1, 4, -100}, {3}, kInt64).to(kCUDA)).item()));

  const Tensor x = randn({4, 6}).to(kCUDA);
  const Tensor picked = index_select(x, 1, from_vector({0, 6}, {2}, kInt64).to(kCUDA));
  message = error_of([] { cuda::synchronize(); });
  EXPECT_NE(message.find("[index_select] index 6 is out of range for the indexed dim of size 6"), std::string::npos)
      << message;
  const Tensor gathered = gather(x, 0, from_vector({-1, 0, 0, 0, 0, 0}, {1, 6}, kInt64).to(kCUDA));
  message = error_of([&] { gathered.cpu(); });
  EXPECT_NE(message.find("[gather] index -1 is out of range for the indexed dim of size 4"), std::string::npos)
      << message;
  expect_matches(picked.narrow(1, 0, 1), x.cpu().narrow(1, 0, 1));  // the good column was read
  // The mean divides by the targets that count, also counted on the device.
  const Tensor target = from_vector({2, -100, 0}, {3}, kInt64);
  expect_matches(cross_entropy(logits, target.to(kCUDA)), cross_entropy(logits.cpu(), target), 1e-6);
}

// The op table's CUDA column (Note [The op table] in tests/op_table.h): every row on the GPU against
// float64 on the CPU, in float64, float32, bfloat16 and float16 (the 16-bit ones staged through
// float32 on the device, Note [Sixteen-bit floats through float32]), forward and gradients.
TEST(Cuda, OpTableMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& table = testutil::op_table();
  for (size_t i = 0; i < table.size(); ++i) {
    SCOPED_TRACE(testutil::op_label(table[i]));
    testutil::compare_with_float64(table[i], testutil::op_table_seed(i), kFloat64, kCUDA, 1e-10);
    for (DType dtype : {kFloat32, kBFloat16, kFloat16})
      testutil::compare_with_float64(table[i], testutil::op_table_seed(i), dtype, kCUDA,
                                     testutil::column_tolerance(table[i], dtype));
    testutil::compare_non_contiguous(table[i], testutil::op_table_seed(i), kCUDA);
    // The GPU computes on zero-size inputs where the CPU does (and refuses where it refuses).
    EXPECT_EQ(testutil::check_zero_size(table[i], testutil::op_table_seed(i), kCUDA),
              testutil::check_zero_size(table[i], testutil::op_table_seed(i), kCPU));
  }
}

// Every BinaryOp and UnaryOp (all values below Count, so a new op is tested without an edit
// here) on the GPU against the CPU's kernel. The GPU's float32 functions (expf, erff, ...) differ
// from the CPU's in the last bits; a 16-bit result, both computed in float32 and rounded once
// (Note [Sixteen-bit elementwise loops]), may so land one step of its dtype apart.
double elementwise_tolerance(DType dtype) {
  return dtype == kFloat32 ? 1e-5 : dtype == kFloat64 ? 1e-12 : is_sixteen_bit(dtype) ? finfo(dtype).eps : 0.0;
}

// A copy within one dtype moves bits on the GPU as on the CPU (cuda/copy.cu).
TEST(Cuda, SixteenBitCopiesWithinADtypeKeepEveryPattern) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testutil::expect_sixteen_bit_copies_keep_every_pattern(kCUDA);
}

TEST(Cuda, EveryBinaryOp) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  using kernels::BinaryOp;
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBFloat16, kFloat16}) {
    // Values >= 1 (pow; no integer division by 0), with ties for int64 (comparisons); y is
    // broadcast along dim 0 (stride 0).
    Tensor x = (rand({6, 5}) * 4.0 + 1.0).to(dtype), y_row = (rand({1, 5}) * 4.0 + 1.0).to(dtype);
    Tensor y = y_row.expand({6, 5});
    Tensor gx = x.to(kCUDA), gy = y_row.to(kCUDA).expand({6, 5});
    for (int i = 0; i < static_cast<int>(BinaryOp::Count); ++i) {
      const auto op = static_cast<BinaryOp>(i);
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " op " + std::to_string(i));
      const DType out_dtype = kernels::is_comparison(op) ? kUInt8 : dtype;
      Tensor want = empty({6, 5}, out_dtype), got = empty({6, 5}, TensorOptions(out_dtype).with_device(kCUDA));
      kernels::binary[kCPU](op, x, y, want);
      kernels::binary[kCUDA](op, gx, gy, got);
      expect_matches(got, want, elementwise_tolerance(dtype));
    }
  }
}

TEST(Cuda, EveryUnaryOp) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  using kernels::UnaryOp;
  // The ops that take scalar arguments or need positive inputs; every other op runs on randn
  // values with no arguments.
  struct Special {
    UnaryOp op;
    double a, b;
    bool positive_input;
  };
  const Special specials[] = {
      {UnaryOp::Log, 0, 0, true},           {UnaryOp::Sqrt, 0, 0, true},       {UnaryOp::Rsqrt, 0, 0, true},
      {UnaryOp::PowScalar, 2.5, 0, true},   {UnaryOp::Clamp, -0.5, 0.7, false}, {UnaryOp::InRange, -0.5, 0.7, false},
      {UnaryOp::LeakyRelu, 0.1, 0, false},  {UnaryOp::AffineScalar, -1.5, 0.25, false},
  };
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    Tensor base = randn({7, 9}).to(dtype);
    for (int i = 0; i < static_cast<int>(UnaryOp::Count); ++i) {
      Special c{static_cast<UnaryOp>(i), 0, 0, false};
      for (const Special& s : specials)
        if (s.op == c.op) c = s;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " op " + std::to_string(i));
      Tensor src = c.positive_input ? abs(base) + 0.1 : base;
      Tensor x = src.t(), gx = src.to(kCUDA).t();  // transposed (strided) inputs
      Tensor want = empty(x.shape(), dtype), got = empty(x.shape(), TensorOptions(dtype).with_device(kCUDA));
      kernels::unary[kCPU](c.op, x, want, c.a, c.b);
      kernels::unary[kCUDA](c.op, gx, got, c.a, c.b);
      expect_matches(got, want, elementwise_tolerance(dtype));
    }
  }
}

TEST(Cuda, MatmulMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto check = [&](const Tensor& a, const Tensor& b) {
      Tensor ga = a.to(kCUDA), gb = b.to(kCUDA);
      expect_matches(matmul(ga, gb), matmul(a, b), 1e-4);
    };
    Tensor a = randn({5, 7}).to(dtype), b = randn({7, 3}).to(dtype);
    check(a, b);                                              // 2-D
    check(randn({7, 5}).to(dtype).t(), b);                    // transposed left operand
    check(a, randn({3, 7}).to(dtype).t());                    // transposed right operand
    check(randn({7, 5}).to(dtype).t(), randn({3, 7}).to(dtype).t());
    check(randn({4, 5, 7}).to(dtype), randn({4, 7, 3}).to(dtype));                     // batched
    check(randn({4, 5, 7}).to(dtype), randn({4, 3, 7}).to(dtype).transpose(-1, -2));  // batched, transposed
    check(randn({4, 5, 7}).to(dtype), b);                     // shared weight: one large gemm
    check(randn({2, 1, 5, 7}).to(dtype), randn({3, 7, 3}).to(dtype));  // broadcast batch dims
    check(randn({7}).to(dtype), b);                           // vector @ matrix
    // The transposed views must be seen on the GPU too, not only on the CPU side.
    Tensor gt = randn({7, 5}).to(dtype).to(kCUDA).t();
    expect_matches(matmul(gt, b.to(kCUDA)), matmul(gt.to(kCPU), b), 1e-4);
    // Two batch levels (Note [Two batch levels]): attention's head-split views, made on each
    // device, against a contiguous 4-D operand, which folds into one level.
    const Tensor qkv = randn({3, 5, 24}).to(dtype);
    auto heads = [](const Tensor& x, int64_t part) {
      return chunk(x, 3, -1)[static_cast<size_t>(part)].reshape({3, 5, 2, 4}).transpose(1, 2);
    };
    const Tensor gqkv = qkv.to(kCUDA);
    const Tensor scores = matmul(heads(qkv, 0), heads(qkv, 1).transpose(-2, -1));
    const Tensor gscores = matmul(heads(gqkv, 0), heads(gqkv, 1).transpose(-2, -1));
    expect_matches(gscores, scores, 1e-4);
    expect_matches(matmul(gscores, heads(gqkv, 2)), matmul(scores, heads(qkv, 2)), 1e-4);
    // k = 0: a sum over nothing is 0.
    expect_matches(matmul(zeros({3, 0}, TensorOptions(dtype).with_device(kCUDA)),
                          zeros({0, 4}, TensorOptions(dtype).with_device(kCUDA))),
                   zeros({3, 4}, dtype));
  }
}

TEST(Cuda, ReductionsMatchCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const bool floating = dtype != kInt64;
    const Tensor x = floating ? randn({5, 7, 3}).to(dtype) : sample({5, 7, 3}, dtype), gx = x.to(kCUDA);
    const double tol = dtype == kFloat32 ? 1e-6 : dtype == kFloat64 ? 1e-12 : 0.0;
    expect_matches(sum(gx), sum(x), tol);
    expect_matches(max(gx), max(x));
    for (const Shape& dims : {Shape{0}, Shape{1}, Shape{2}, Shape{0, 2}}) {
      expect_matches(sum(gx, dims), sum(x, dims), tol);
      expect_matches(max(gx, dims), max(x, dims));  // max and min pick an element: exact
      expect_matches(min(gx, dims, true), min(x, dims, true));
      if (floating) expect_matches(mean(gx, dims), mean(x, dims), tol);
    }
    for (int64_t dim = 0; dim < 3; ++dim) expect_matches(argmax(gx, dim), argmax(x, dim));
  }
  // Many more elements than a block has threads, and more outputs than one grid has blocks.
  const Tensor long_row = randn({100000}), many = randn({70000, 3});
  expect_matches(sum(long_row.to(kCUDA)), sum(long_row), 1e-6);
  expect_matches(sum(many.to(kCUDA), {1}), sum(many, {1}), 1e-6);
  // Ties go to the first maximum; NaN wins max, min and argmax (the first NaN), as in PyTorch.
  const Tensor ties = from_vector({1, 3, 3, 2, 0, 0}, {2, 3});
  expect_matches(argmax(ties.to(kCUDA), 1), argmax(ties, 1));
  const Tensor with_nan = from_vector({1.0, std::nan(""), 3.0, 0.0}, {2, 2});
  expect_matches(max(with_nan.to(kCUDA), {1}), max(with_nan, {1}));
  expect_matches(min(with_nan.to(kCUDA), {0}), min(with_nan, {0}));
  expect_matches(argmax(with_nan.to(kCUDA), 1), argmax(with_nan, 1));
}

TEST(Cuda, SplitReductionsMatchCpuAndRepeat) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Few outputs over long rows run as two passes over chunks (Note [Split reductions]): the
  // results agree with the CPU, and are bitwise the same on a second run.
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == kFloat32 ? 1e-6 : dtype == kFloat64 ? 1e-12 : 0.0;
    const Tensor x = dtype == kInt64 ? sample({3, 300001}, dtype) : randn({3, 300001}).to(dtype), gx = x.to(kCUDA);
    const Tensor flat = x.flatten(), gflat = gx.flatten();
    if (dtype == kFloat32) {
      // Two float32 sums of 900,003 values in different trees differ by their rounding, about
      // eps * depth * ||x|| (1e-4 here, measured on an H200): too much for a relative 1e-6 of a
      // sum near 36. So each device's float32 sum is held to that bound against the float64 sum
      // of the same values; a chunk lost or counted twice would be off by hundreds.
      auto expect_near_exact_sum = [](const Tensor& got, const Tensor& values, const std::vector<int64_t>& dims) {
        const Tensor exact = sum(values.to(kFloat64), dims), norm = sqrt(sum(pow(values.to(kFloat64), 2.0), dims));
        const double depth = std::log2(static_cast<double>(values.numel() / exact.numel()));
        const std::vector<double> g = got.to(kCPU).to_vector<double>(), e = exact.to_vector<double>(),
                                  bound = norm.to_vector<double>();
        for (size_t i = 0; i < g.size(); ++i)
          EXPECT_NEAR(g[i], e[i], 0x1p-23 * depth * bound[i]) << "output " << i << " on " << got.device().str();
      };
      for (const Tensor& values : {flat, gflat}) expect_near_exact_sum(sum(values), flat, {});
      for (const Tensor& values : {x, gx}) expect_near_exact_sum(sum(values, {1}), x, {1});
      expect_near_exact_sum(mean(gflat) * static_cast<double>(flat.numel()), flat, {});
    } else {
      expect_matches(sum(gflat), sum(flat), tol);
      expect_matches(sum(gx, {1}), sum(x, {1}), tol);
    }
    EXPECT_EQ(sum(gflat).item(), sum(gflat).item());  // same chunks, same trees
    expect_matches(max(gflat), max(flat));
    expect_matches(min(gx, {1}), min(x, {1}));
    if (dtype == kFloat64) expect_matches(mean(gflat), mean(flat), tol);
    expect_matches(argmax(gflat, 0), argmax(flat, 0));
    expect_matches(argmax(gx, 1), argmax(x, 1));
  }
  // argmax over chunks: the first of tied maxima, even when the ties sit in different chunks; the
  // first NaN wins, wherever it is (PyTorch's argmax).
  Tensor ties = zeros({200000});
  ties.narrow(0, 150000, 1).fill_(5.0);
  ties.narrow(0, 7, 1).fill_(5.0);
  ties.narrow(0, 199999, 1).fill_(5.0);
  expect_matches(argmax(ties.to(kCUDA), 0), argmax(ties, 0));
  EXPECT_EQ(argmax(ties.to(kCUDA), 0).item(), 7.0);
  Tensor nan_late = ties.clone();
  nan_late.narrow(0, 100, 1).fill_(NAN);
  nan_late.narrow(0, 160000, 1).fill_(NAN);
  expect_matches(argmax(nan_late.to(kCUDA), 0), argmax(nan_late, 0));
  EXPECT_EQ(argmax(nan_late.to(kCUDA), 0).item(), 100.0);
  Tensor nan_first = ties.clone();
  nan_first.narrow(0, 0, 1).fill_(NAN);
  expect_matches(argmax(nan_first.to(kCUDA), 0), argmax(nan_first, 0));
  EXPECT_EQ(argmax(nan_first.to(kCUDA), 0).item(), 0.0);
  // A NaN anywhere wins max, across chunks too.
  expect_matches(max(nan_late.to(kCUDA)), max(nan_late));
}

TEST(Cuda, SoftmaxMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == kFloat32 ? 1e-6 : 1e-12;
    for (const Tensor& x : {randn({6, 10}).to(dtype), (randn({3, 3000}) * 20.0).to(dtype)}) {
      for (int64_t dim : {0, 1}) {
        expect_matches(softmax(x.to(kCUDA), dim), softmax(x, dim), tol);
        expect_matches(log_softmax(x.to(kCUDA), dim), log_softmax(x, dim), tol);
      }
    }
  }
}

// The softmax kernels' spec (scale, causal rows, log) and the backward kernel, slot against slot.
TEST(Cuda, SoftmaxSpecsAndBackwardMatchCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const kernels::SoftmaxSpec specs[] = {{}, {.log = true}, {.scale = 0.25}, {.scale = 0.5, .causal_rows = 6},
                                        {.log = true, .scale = 2.0, .causal_rows = 4}};
  for (DType dtype : {kFloat32, kFloat64}) {
    const double tol = dtype == kFloat32 ? 1e-6 : 1e-12;
    const Tensor x = (randn({12, 9}) * 3.0).to(dtype), g = randn({12, 9}).to(dtype);
    for (const kernels::SoftmaxSpec& spec : specs) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " log " + std::to_string(spec.log) + " scale " +
                   std::to_string(spec.scale) + " causal rows " + std::to_string(spec.causal_rows));
      Tensor y = empty({12, 9}, dtype), gy = empty({12, 9}, TensorOptions(dtype).with_device(kCUDA));
      kernels::softmax[kCPU](x, y, spec);
      kernels::softmax[kCUDA](x.to(kCUDA), gy, spec);
      expect_matches(gy, y, tol);
      Tensor gx = empty({12, 9}, dtype), ggx = empty({12, 9}, TensorOptions(dtype).with_device(kCUDA));
      kernels::softmax_backward[kCPU](y, g, gx, spec);
      kernels::softmax_backward[kCUDA](y.to(kCUDA), g.to(kCUDA), ggx, spec);
      expect_matches(ggx, gx, tol);
    }
    // A row of -inf with empty_rows_masked: zeros on both (Note [Rows that attend to nothing]).
    const Tensor empty_row = from_vector({0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, {12, 1}).to(kUInt8);
    const Tensor holes = where(empty_row, full({}, -INFINITY, dtype), x);
    const kernels::SoftmaxSpec masked{.scale = 0.5, .empty_rows_masked = true};
    Tensor y = empty({12, 9}, dtype), gy = empty({12, 9}, TensorOptions(dtype).with_device(kCUDA));
    kernels::softmax[kCPU](holes, y, masked);
    kernels::softmax[kCUDA](holes.to(kCUDA), gy, masked);
    expect_matches(gy, y, tol);
    EXPECT_EQ(y.select(0, 3).to_vector<double>(), std::vector<double>(9, 0.0));
  }
}

TEST(Cuda, CrossEntropyMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor target = from_vector({3, 0, 9, -100, 5, 5, 1, 2}, {8}, kInt64);  // one row ignored
  for (double smoothing : {0.0, 0.1}) {
    SCOPED_TRACE(testing::Message() << "label smoothing " << smoothing);
    const Tensor logits = randn({8, 10}).requires_grad_();
    const Tensor glogits = logits.detach().to(kCUDA).requires_grad_();
    const Tensor loss = cross_entropy(logits, target, Reduction::Mean, -100, smoothing);
    const Tensor gloss = cross_entropy(glogits, target.to(kCUDA), Reduction::Mean, -100, smoothing);
    expect_matches(gloss, loss, 1e-6);
    loss.backward();
    gloss.backward();
    expect_matches(glogits.grad(), logits.grad(), 1e-6);
    expect_matches(cross_entropy(glogits, target.to(kCUDA), Reduction::None, -100, smoothing),
                   cross_entropy(logits, target, Reduction::None, -100, smoothing), 1e-6);
  }
}

// cross_entropy's composed forms (Note [Cross-entropy beyond the fused kernel]), the mixed-dtype
// layer norm, 16-bit variance and a checked fill, each on the GPU against the CPU.
TEST(Cuda, ComposedLossesAndSixteenBitReductionsMatchCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor target3 = from_vector({3, 0, -1, 2, 1, 1}, {2, 3}, kInt64), weight = rand({4}) + 0.5;
  const Tensor target2 = from_vector({3, 0, -1, 2}, {4}, kInt64), probs = softmax(randn({4, 4}), 1);
  using Loss = std::function<Tensor(const Tensor&, Device)>;
  const std::vector<std::pair<Shape, Loss>> cases = {
      {{2, 4, 3}, [&](const Tensor& x, Device d) { return cross_entropy(x, target3.to(d), Reduction::Mean, -1, 0.1); }},
      {{4, 4}, [&](const Tensor& x, Device d) {
         return cross_entropy(x, target2.to(d), Reduction::Mean, -1, 0.2, weight.to(d));
       }},
      {{4, 4}, [&](const Tensor& x, Device d) {
         return cross_entropy(x, probs.to(d), Reduction::Sum, -100, 0.1, weight.to(d));
       }},
  };
  for (const auto& [shape, loss] : cases) {
    const Tensor x = randn(shape).requires_grad_(), gx = x.detach().to(kCUDA).requires_grad_();
    const Tensor l = loss(x, kCPU), gl = loss(gx, kCUDA);
    expect_matches(gl, l, 1e-5);
    l.backward();
    gl.backward();
    expect_matches(gx.grad(), x.grad(), 1e-5);
  }
  for (DType half : {kBFloat16, kFloat16}) {
    const Tensor x = randn({3, 8}).to(half), w = randn({8}), b = randn({8});
    const Tensor y = layer_norm(x, {8}, w, b), gy = layer_norm(x.to(kCUDA), {8}, w.to(kCUDA), b.to(kCUDA));
    ASSERT_EQ(gy.dtype(), half);
    expect_matches(gy, y, finfo(half).eps);
    const Tensor ramp = arange(100, kFloat32).to(half);
    expect_matches(var(ramp.to(kCUDA), {0}), var(ramp, {0}), finfo(half).eps);  // within a rounding
  }
  expect_error([] { full({2}, 1e300, TensorOptions(kFloat16).with_device(kCUDA)); },
               "[full] value 1e+300 cannot be converted to float16");
}

// A two-layer MLP's training step on the GPU: loss, every gradient and the accuracy count agree
// with the CPU's. Everything the MLP example needs runs on CUDA kernels.
TEST(Cuda, MlpTrainingStepMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor x = randn({32, 20}), w1 = randn({20, 16}) * 0.3, b1 = zeros({16}), w2 = randn({16, 4}) * 0.3;
  const Tensor labels = from_vector(std::vector<double>(32, 2.0), {32}, kInt64);
  auto step = [&](Device device) {
    // detach(): to(kCPU) of a CPU tensor is the tensor itself, so without it the CPU step would
    // make w1 a leaf that requires grad, and the CUDA step's to(kCUDA) a non-leaf copy of it.
    std::vector<Tensor> params = {w1.detach().to(device).requires_grad_(), b1.detach().to(device).requires_grad_(),
                                  w2.detach().to(device).requires_grad_()};
    const Tensor logits = matmul(relu(matmul(x.to(device), params[0]) + params[1]), params[2]);
    const Tensor loss = cross_entropy(logits, labels.to(device));
    loss.backward();
    params.push_back(loss.detach());
    params.push_back(sum(eq(argmax(logits.detach(), 1), labels.to(device))));
    return params;
  };
  const std::vector<Tensor> cpu = step(kCPU), gpu = step(kCUDA);
  for (size_t i = 0; i < 3; ++i) expect_matches(gpu[i].grad(), cpu[i].grad(), 1e-5);
  expect_matches(gpu[3], cpu[3], 1e-6);
  expect_matches(gpu[4], cpu[4]);
}

// Each input and parameter as a leaf on `device` (a copy of the CPU one), ready for backward.
std::vector<Tensor> leaves_on(const std::vector<Tensor>& cpu, Device device) {
  std::vector<Tensor> out;
  for (const Tensor& t : cpu) out.push_back(t.defined() ? t.detach().to(device).requires_grad_() : Tensor());
  return out;
}

// Runs fn on CPU leaves and on CUDA copies of them, backpropagates sum(out * r) for one fixed r,
// and compares the outputs and every gradient.
using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

void expect_same_forward_backward(const TensorFn& fn,
                                  const std::vector<Tensor>& inputs, double tol) {
  const std::vector<Tensor> cpu = leaves_on(inputs, kCPU), gpu = leaves_on(inputs, kCUDA);
  const Tensor out = fn(cpu), gout = fn(gpu);
  expect_matches(gout, out, tol);
  const Tensor r = randn(out.shape()).to(out.dtype());
  sum(out * r).backward();
  sum(gout * r.to(kCUDA)).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "gradient of input " << i);
    if (inputs[i].defined()) expect_matches(gpu[i].grad(), cpu[i].grad(), tol);
  }
}

// linear's bias in the product (Note [A bias in the product]) and dropout's masked scale.
TEST(Cuda, LinearAndMaskedScaleMatchCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == kFloat32 ? 1e-4 : 1e-12;
    expect_same_forward_backward([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); },
                                 {randn({2, 5, 7}).to(dtype), randn({3, 7}).to(dtype), randn({3}).to(dtype)}, tol);
    const Tensor x = randn({1000}).to(dtype), keep = rand({1000}) >= 0.3;
    Tensor want = empty({1000}, dtype), got = empty({1000}, TensorOptions(dtype).with_device(kCUDA));
    kernels::masked_scale[kCPU](x, keep, 1.0 / 0.7, want);
    kernels::masked_scale[kCUDA](x.to(kCUDA), keep.to(kCUDA), 1.0 / 0.7, got);
    expect_matches(got, want, 0.0);
  }
}

TEST(Cuda, NllLossMatchesCpuAndChecksTargetsOnTheDevice) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Note [Index errors found on the device]: the call does not wait for the device to check its
  // targets, so a bad one returns from the call and is raised at the next synchronisation, with
  // the CPU's message; the device stays usable.
  const Tensor logp = log_softmax(randn({4, 5}), 1), weight = rand({5}) + 0.5;
  const Tensor target = from_vector({2, -100, 0, 4}, {4}, kInt64);  // one ignored
  for (const Tensor& bad : {from_vector({1, 7, -100, 0}, {4}, kInt64), from_vector({1, -3, -100, 0}, {4}, kInt64)}) {
    Tensor loss;
    ASSERT_NO_THROW(loss = nll_loss(logp.to(kCUDA), bad.to(kCUDA), Reduction::Mean, -100, weight.to(kCUDA)));
    const std::string message = error_of([&] { loss.item(); });
    const int64_t value = bad.to_vector<int64_t>()[1];
    EXPECT_NE(message.find("[nll_loss] target " + std::to_string(value) + " is out of range for 5 classes"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("raised at the next synchronisation"), std::string::npos) << message;
    expect_error([&] { nll_loss(logp, bad); }, "[nll_loss] target " + std::to_string(value) + " is out of range");
  }
  // Every reduction, with and without class weights: the mean's divisor (the targets that count,
  // or their summed weights) is computed on the device too.
  for (const Reduction reduction : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    for (const bool weighted : {false, true}) {
      SCOPED_TRACE(testing::Message() << "reduction " << static_cast<int>(reduction) << (weighted ? " weighted" : ""));
      expect_same_forward_backward(
          [&](const std::vector<Tensor>& v) {
            return nll_loss(v[0], target.to(v[0].device()), reduction, -100, weighted ? v[1] : Tensor());
          },
          weighted ? std::vector<Tensor>{logp, weight} : std::vector<Tensor>{logp}, 1e-6);
    }
  }
  // Spatial targets [N, d]; and a batch whose targets are all ignored has a NaN mean on both devices.
  const Tensor spatial = from_vector({0, 3, -100, 1, 2, 4}, {2, 3}, kInt64);
  expect_same_forward_backward(
      [&](const std::vector<Tensor>& v) { return nll_loss(v[0], spatial.to(v[0].device())); },
      {log_softmax(randn({2, 5, 3}), 1)}, 1e-6);
  const Tensor ignored = full({4}, -100.0, kInt64);
  EXPECT_TRUE(std::isnan(nll_loss(logp.to(kCUDA), ignored.to(kCUDA)).item()));
  EXPECT_TRUE(std::isnan(nll_loss(logp, ignored).item()));
}

TEST(Cuda, ConvMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  struct Geometry {
    Shape weight;
    Pair stride, padding, dilation;
  };
  const std::vector<Geometry> geometries = {
      {{4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}}, {{4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}},
      {{4, 3, 3, 2}, {1, 2}, {2, 0}, {2, 1}}, {{4, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}},  // pointwise
      {{4, 3, 1, 1}, {2, 2}, {0, 0}, {1, 1}},
  };
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Geometry& g : geometries) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " weight " << shape_str(g.weight) << " stride "
                                      << g.stride[0] << "x" << g.stride[1]);
      auto fn = [&](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], g.stride, g.padding, g.dilation); };
      expect_same_forward_backward(
          fn, {randn({5, 3, 9, 8}).to(dtype), randn(g.weight).to(dtype), randn({g.weight[0]}).to(dtype)},
          dtype == kFloat32 ? 1e-4 : 1e-10);
    }
  }
}

TEST(Cuda, PoolingMatchesCpuBitwise) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // See Note [Pooling backward by gathering]: the same additions in the same order as the CPU.
  const Tensor x = randn({2, 3, 9, 7});
  auto max_pool = [](const std::vector<Tensor>& v) { return max_pool2d(v[0], {3, 3}, {2, 2}, {1, 1}); };
  auto overlapping = [](const std::vector<Tensor>& v) { return max_pool2d(v[0], {3, 2}, {1, 1}); };
  auto avg_pad = [](const std::vector<Tensor>& v) { return avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1}, true); };
  auto avg_nopad = [](const std::vector<Tensor>& v) { return avg_pool2d(v[0], {3, 3}, {2, 1}, {1, 1}, false); };
  auto global = [](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], {1, 1}); };
  auto adaptive = [](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], {4, 3}); };
  for (const TensorFn& fn : std::vector<TensorFn>{max_pool, overlapping, avg_pad, avg_nopad, global, adaptive}) {
    expect_same_forward_backward(fn, {x}, 0.0);
  }
  // Ties in a max window: the first maximum takes the gradient on both devices.
  expect_same_forward_backward(max_pool, {ones({1, 1, 4, 4})}, 0.0);
}

TEST(Cuda, BatchNormMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // One piece per channel; several pieces whose bounds fall inside a sample (Note [Batch-norm sums
  // by channel and split]); and s = 1 (BatchNorm1d), where every step of a walk changes sample.
  // Both CUDA paths: ember's kernels, and cuDNN's where it is loaded. ember's statistics are sums
  // in double on both devices; cuDNN's are float32 sums, which over the 20,000 values of a
  // BatchNorm1d channel differ from them by up to a few 1e-5 (3.8e-5 measured on an H200).
  for (bool with_cudnn : {false, true}) {
    const cuda::CudnnSwitchGuard path(with_cudnn);
    if (with_cudnn && !cuda::cudnn_active()) continue;
    for (const Shape& shape : std::vector<Shape>{{6, 4, 5, 5}, {9, 3, 37, 41}, {20000, 4}}) {
      for (DType dtype : {kFloat32, kFloat64}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " " << shape_str(shape)
                                        << (with_cudnn ? " cuDNN" : " ember's kernels"));
        const double tol = dtype == kFloat32 ? (with_cudnn ? 1e-4 : 1e-5) : 1e-10;
        const int64_t c = shape[1];
        const Tensor running_mean = zeros({c}, dtype), running_var = ones({c}, dtype);
        const Tensor grunning_mean = running_mean.to(kCUDA), grunning_var = running_var.to(kCUDA);
        const Tensor x = (randn(shape) * 3.0 + 1.0).to(dtype);
        const std::vector<Tensor> cpu = leaves_on({x, randn({c}).to(dtype), randn({c}).to(dtype)}, kCPU);
        const std::vector<Tensor> gpu = leaves_on({cpu[0], cpu[1], cpu[2]}, kCUDA);
        const Tensor y = batch_norm(cpu[0], running_mean, running_var, cpu[1], cpu[2], true);
        const Tensor gy = batch_norm(gpu[0], grunning_mean, grunning_var, gpu[1], gpu[2], true);
        expect_matches(gy, y, tol);
        expect_matches(grunning_mean, running_mean, tol);
        expect_matches(grunning_var, running_var, tol);
        const Tensor r = randn(y.shape()).to(dtype);
        sum(y * r).backward();
        sum(gy * r.to(kCUDA)).backward();
        for (size_t i = 0; i < 3; ++i) expect_matches(gpu[i].grad(), cpu[i].grad(), tol);
        // Evaluation mode normalises with the running statistics.
        expect_matches(batch_norm(gpu[0].detach(), grunning_mean, grunning_var, gpu[1].detach(), gpu[2].detach(), false),
                       batch_norm(cpu[0].detach(), running_mean, running_var, cpu[1].detach(), cpu[2].detach(), false),
                       tol);
      }
    }
  }
}

// A limit on the card (Note [Memory limits]): fresh blocks past it fail with the facts and leave
// nothing behind, and a fraction is of the card's memory.
TEST(Cuda, MemoryLimitIsEnforced) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testutil::expect_fresh_blocks_fail_past_the_limit(kCUDA);
  memory::set_limit_fraction(kCUDA, 0.5);
  EXPECT_EQ(memory::limit(kCUDA), static_cast<int64_t>(0.5 * static_cast<double>(memory::device_memory_bytes(kCUDA))));
  memory::clear_limit(kCUDA);
}

// The statistics kernel is the CPU's function, Note [Shifted moments], bitwise on exact sums.
TEST(Cuda, BatchNormStatisticsAreTheSharedMomentsBitwise) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testutil::expect_batch_norm_stats_are_the_shared_moments(kCUDA);
}

// A 16-bit input with float32 weight, bias and running statistics (Note [Mixed-dtype batch norm]),
// as a BatchNorm after a convolution has under autocast: both modes, both CUDA paths, against the
// CPU; the statistics and the weight's and bias's gradients stay float32.
TEST(Cuda, MixedDtypeBatchNormMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (bool with_cudnn : {false, true}) {
    const cuda::CudnnSwitchGuard path(with_cudnn);
    if (with_cudnn && !cuda::cudnn_active()) continue;
    for (DType dtype : {kBFloat16, kFloat16}) {
      for (bool training : {true, false}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << (training ? " training" : " eval")
                                        << (with_cudnn ? " cuDNN" : " ember's kernels"));
        const Tensor x = (randn({6, 3, 5, 4}) * 2.0 + 0.5).to(dtype);
        const Tensor running_mean = randn({3}) * 0.1, running_var = rand({3}) + 0.5;
        const Tensor grunning_mean = running_mean.to(kCUDA), grunning_var = running_var.to(kCUDA);
        const std::vector<Tensor> cpu = leaves_on({x, rand({3}) + 0.5, randn({3})}, kCPU);
        const std::vector<Tensor> gpu = leaves_on(cpu, kCUDA);
        const Tensor y = batch_norm(cpu[0], running_mean, running_var, cpu[1], cpu[2], training);
        const Tensor gy = batch_norm(gpu[0], grunning_mean, grunning_var, gpu[1], gpu[2], training);
        ASSERT_EQ(gy.dtype(), dtype);
        expect_matches(gy, y, finfo(dtype).eps);
        expect_matches(grunning_mean, running_mean, 1e-5);
        expect_matches(grunning_var, running_var, 1e-5);
        const Tensor r = randn(y.shape()).to(dtype);
        sum((y * r).to(kFloat32)).backward();
        sum((gy * r.to(kCUDA)).to(kFloat32)).backward();
        ASSERT_EQ(gpu[1].grad().dtype(), kFloat32);
        for (size_t i = 0; i < 3; ++i) expect_matches(gpu[i].grad(), cpu[i].grad(), i == 0 ? finfo(dtype).eps : 1e-3);
      }
    }
  }
}

// A small residual conv net's training step: every op of the ResNet example on the GPU.
TEST(Cuda, ConvNetTrainingStepMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor labels = from_vector({1, 0, 3, 2, 2, 1, 0, 3}, {8}, kInt64);
  auto net = [&](const std::vector<Tensor>& v) {
    const Tensor h = relu(batch_norm(conv2d(v[0], v[1], Tensor(), {1, 1}, {1, 1}), Tensor(), Tensor(), v[2], v[3], true));
    const Tensor block = relu(h + batch_norm(conv2d(h, v[4], Tensor(), {1, 1}, {1, 1}), Tensor(), Tensor(), v[2], v[3], true));
    const Tensor pooled = adaptive_avg_pool2d(max_pool2d(block, {2, 2}, {2, 2}), {1, 1}).view({8, 6});
    return cross_entropy(matmul(pooled, v[5]), labels.to(v[0].device()));
  };
  expect_same_forward_backward(net,
                               {randn({8, 1, 12, 12}), randn({6, 1, 3, 3}) * 0.5, ones({6}), zeros({6}),
                                randn({6, 6, 3, 3}) * 0.2, randn({6, 4}) * 0.5},
                               1e-4);
}

TEST(Cuda, IndexingMatchesCpuBitwise) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Repeated indices: their gradients add up in the same order on both devices (Note [Index
  // adjoints by sorting] in cuda/index.cu).
  const Tensor rows = from_vector({2, 0, 2, 3, 2}, {5}, kInt64);
  expect_same_forward_backward([&](const std::vector<Tensor>& v) { return index_select(v[0], 1, rows.to(v[0].device())); },
                               {randn({3, 4, 2})}, 0.0);
  const Tensor picks = from_vector({1, 1, 0, 2, 2, 2, 0, 1, 1, 0, 0, 0}, {2, 3, 2}, kInt64);
  expect_same_forward_backward([&](const std::vector<Tensor>& v) { return gather(v[0], 1, picks.to(v[0].device())); },
                               {randn({2, 4, 2})}, 0.0);
}

TEST(Cuda, CumsumMatchesCpuBitwise) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // The CPU's additions in the CPU's order (Note [Cumsum one row per thread]): equal bitwise,
  // forward and backward (a cumsum from the back), along every dim.
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    for (int64_t dim = 0; dim < 3; ++dim)
      expect_same_forward_backward([&](const std::vector<Tensor>& v) { return cumsum(v[0], dim); },
                                   {randn({4, 300, 5}).to(dtype)}, 0.0);
  }
  for (DType dtype : {kInt64, kUInt8}) {
    const Tensor x = sample({6, 50}, dtype);
    expect_matches(cumsum(x.to(kCUDA), 1), cumsum(x, 1));
  }
}

TEST(Cuda, SortMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Note [Sort order] on both devices: NaN largest, -0.0 tied with 0.0, ties by position (Note
  // [Sorting rows with two stable sorts] in cuda/sort.cu).
  const std::vector<double> tricky{3, NAN, -0.0, 1, 0.0, -INFINITY, 3, NAN, INFINITY, -2, 0.0, 1};
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = from_vector(tricky, {2, 6}).to(dtype);
    for (bool descending : {false, true}) {
      for (int64_t dim : {0, 1}) {
        const auto [values, indices] = sort(x, dim, descending);
        const auto [gvalues, gindices] = sort(x.to(kCUDA), dim, descending);
        expect_matches(gindices, indices);
        expect_matches(gvalues, values);
      }
    }
    const Tensor big = randint(-4, 4, {7, 1000, 3}).to(dtype);  // many ties
    for (int64_t dim = 0; dim < 3; ++dim) {
      expect_matches(argsort(big.to(kCUDA), dim), argsort(big, dim));
      expect_matches(argsort(big.to(kCUDA), dim, true), argsort(big, dim, true));
    }
    const auto [top, where] = topk(big, 5, 1);
    const auto [gtop, gwhere] = topk(big.to(kCUDA), 5, 1);
    expect_matches(gwhere, where);
    expect_matches(gtop, top);
  }
  for (DType dtype : {kInt64, kUInt8}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = sample({4, 301}, dtype);
    expect_matches(argsort(x.to(kCUDA), 1), argsort(x, 1));
    expect_matches(argsort(x.to(kCUDA), 0, true), argsort(x, 0, true));
  }
  const Tensor negative = from_vector({5, -3, 0, -3, 7, -9000000000.0}, {6}, kInt64);
  expect_matches(argsort(negative.to(kCUDA)), argsort(negative));
}

TEST(Cuda, TransformerOpsMatchCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == kFloat32 ? 1e-5 : 1e-10;
    auto sample_of = [&](const Shape& shape) { return randn(shape).to(dtype); };
    // layer_norm: with and without affine parameters, a row longer than a block, a large mean
    expect_same_forward_backward([](const std::vector<Tensor>& v) { return layer_norm(v[0], {3, 8}, v[1], v[2]); },
                                 {sample_of({5, 3, 8}) * 3.0 + 2.0, sample_of({3, 8}), sample_of({3, 8})}, tol);
    expect_same_forward_backward([](const std::vector<Tensor>& v) { return layer_norm(v[0], {700}); },
                                 {sample_of({4, 700}) + 100.0}, tol);
    expect_same_forward_backward([](const std::vector<Tensor>& v) { return silu(v[0]); }, {sample_of({6, 7})}, tol);
    expect_same_forward_backward([](const std::vector<Tensor>& v) { return stddev(var(v[0], {0, 2}), {0}, 0); },
                                 {sample_of({4, 5, 6})}, tol);
    // masked_fill, tril and triu build their masks on the tensor's device
    const Tensor mask = (randn({3, 1, 5}) > 0.0);
    expect_same_forward_backward([&](const std::vector<Tensor>& v) {
      return masked_fill(tril(v[0], -1) + triu(v[0], 2), mask.to(v[0].device()), -2.0);
    }, {sample_of({3, 4, 5})}, 0.0);
    // attention with a causal mask, a padding mask and a float mask
    const Tensor keep = from_vector({1, 1, 0, 1, 1, 1, 0}, {7}).to(kUInt8), bias = sample_of({5, 7});
    expect_same_forward_backward([&](const std::vector<Tensor>& v) {
      const Device d = v[0].device();
      return scaled_dot_product_attention(v[0], v[1], v[2], causal_attn_mask(keep.to(d), 5, 7)) +
             scaled_dot_product_attention(v[0], v[1], v[2], bias.to(d), 0.0, false, 0.3);
    }, {sample_of({2, 3, 5, 4}), sample_of({2, 3, 7, 4}), sample_of({2, 3, 7, 6})}, tol);
    // and without a mask: the fused scaled (causal) softmax, with more queries than keys too
    for (const int64_t queries : {5, 9}) {
      expect_same_forward_backward([&](const std::vector<Tensor>& v) {
        return scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), 0.0, true) +
               scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), 0.0, false, 0.3);
      }, {sample_of({2, 3, queries, 4}), sample_of({2, 3, 7, 4}), sample_of({2, 3, 7, 6})}, tol);
    }
  }
}

// Note [Fused attention on CUDA]: the CUDA kernels, forced (Auto keeps CUDA on the math path
// until this has run on a GPU), against the CPU's fused kernels: shapes off both devices' tiles,
// every mask kind, causal with L != S, head dims 8 to 128, dropout (the same Philox numbers on
// both devices, so the same mask), float32 and float64, and bfloat16 through the table's staging.
TEST(Cuda, FusedAttentionMatchesCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  AttentionBackendGuard fused(AttentionBackend::Fused);
  struct Lengths {
    int64_t L, S, E, Ev;
  };
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == kFloat64 ? 1e-10 : dtype == kFloat32 ? 1e-4 : 5e-2;
    for (const Lengths& n : {Lengths{1, 1, 8, 8}, Lengths{17, 33, 64, 64}, Lengths{70, 20, 32, 48},
                             Lengths{40, 130, 128, 128}}) {
      SCOPED_TRACE(testing::Message() << "L " << n.L << ", S " << n.S << ", E " << n.E << ", Ev " << n.Ev);
      const Tensor keep = rand({2, 1, n.L, n.S}) > 0.3, padding = rand({2, 1, 1, n.S}) > 0.2;
      const Tensor bias = randn({n.L, n.S}).to(dtype == kBFloat16 ? kBFloat16 : dtype);
      expect_same_forward_backward([&](const std::vector<Tensor>& v) {
        const Device d = v[0].device();
        manual_seed(5);
        return scaled_dot_product_attention(v[0], v[1], v[2]) +
               scaled_dot_product_attention(v[0], v[1], v[2], Tensor(), 0.0, true, 0.4) +
               scaled_dot_product_attention(v[0], v[1], v[2], keep.to(d)) +
               scaled_dot_product_attention(v[0], v[1], v[2], padding.to(d), 0.2, false) +
               scaled_dot_product_attention(v[0], v[1], v[2], bias.to(d));
      }, {randn({2, 3, n.L, n.E}).to(dtype), randn({2, 3, n.S, n.E}).to(dtype), randn({2, 3, n.S, n.Ev}).to(dtype)},
         tol);
    }
  }
  // And against CUDA's own math path.
  const Tensor q = randn({2, 2, 37, 16}, TensorOptions(kFloat64).with_device(kCUDA));
  const Tensor k = randn({2, 2, 50, 16}, TensorOptions(kFloat64).with_device(kCUDA));
  const Tensor got = scaled_dot_product_attention(q, k, k, Tensor(), 0.0, true);
  AttentionBackendGuard math(AttentionBackend::Math);
  expect_matches(got, scaled_dot_product_attention(q, k, k, Tensor(), 0.0, true), 1e-10);
}

TEST(Cuda, EmbeddingMatchesCpuBitwise) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Many repeated ids: the sorted runs add their rows in the CPU's order (Note [Embedding ids on
  // the device] in cuda/embedding.cu), so the gradients are equal bit for bit.
  const Tensor ids = randint(0, 37, {30, 200});
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_same_forward_backward([&](const std::vector<Tensor>& v) { return embedding(v[0], ids.to(v[0].device())); },
                                 {randn({40, 19}).to(dtype)}, 0.0);
  }
  // Ids on the GPU are not checked on the host: an out-of-range id gives a NaN row and no gradient,
  // and is raised at the next synchronisation (which of the two bad ids depends on the threads).
  const Tensor weight = ones({4, 3}, TensorOptions(kFloat32).with_device(kCUDA)).requires_grad_();
  const Tensor bad = from_vector({1, 9, -1}, {3}, kInt64).to(kCUDA);
  Tensor y = embedding(weight, bad);
  const std::string message = error_of([&] { y.to(kCPU); });
  EXPECT_NE(message.find("[embedding] id "), std::string::npos) << message;
  EXPECT_NE(message.find(" is out of range for a table of 4 embeddings"), std::string::npos) << message;
  const std::vector<double> got = y.to(kCPU).to_vector<double>();  // raised once, then cleared
  EXPECT_EQ(got[0], 1.0);
  EXPECT_TRUE(std::isnan(got[3]) && std::isnan(got[6]));
  sum(y.narrow(0, 0, 1)).backward();
  EXPECT_EQ(weight.grad().to(kCPU).to_vector<double>(), (std::vector<double>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
}

TEST(Cuda, RandomNumbersEqualCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Sizes that end inside a block of four (each CUDA thread writes one block, Note [One thread
  // per Philox block]), a draw that starts at a non-zero offset, and a grid of many blocks.
  for (DType dtype : {kFloat32, kFloat64}) {
    for (int64_t n : {1, 3, 1001, 100003}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " n=" << n);
      manual_seed(1234);
      const Tensor u = rand({n}, dtype), z = randn({n}, dtype), later = rand({n}, dtype) * 2.0 - 1.0;
      const GeneratorState cpu_after = default_generator(kCPU).state();  // manual_seed resets it
      manual_seed(1234);
      const TensorOptions on_gpu = TensorOptions(dtype).with_device(kCUDA);
      const Tensor gu = rand({n}, on_gpu), gz = randn({n}, on_gpu), glater = rand({n}, on_gpu) * 2.0 - 1.0;
      expect_matches(gu, u);  // uniforms: bit for bit
      expect_matches(glater, later);
      // Normals: float32 takes float Box-Muller on the GPU, float64 double Box-Muller, whose last
      // bits may differ from the CPU's libm (Note [Bit-identical random numbers] in cuda/random.cu).
      expect_matches(gz, z, dtype == kFloat32 ? 4e-6 : 1e-12);
      EXPECT_EQ(default_generator(kCUDA).state(), cpu_after);
    }
  }
  // uniform(a, b) and normal(mean, std) go through the same affine map on both devices.
  manual_seed(99);
  const Tensor u = rand({257}, kFloat64) * 3.0 + 5.0;
  manual_seed(99);
  expect_matches(rand({257}, TensorOptions(kFloat64).with_device(kCUDA)) * 3.0 + 5.0, u);
}

TEST(Cuda, DropoutMasksEqualCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Dropout compares uniforms with p, so the kept elements are the same on both devices.
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = randn({37, 129}).to(dtype);
    manual_seed(5);
    const Tensor y = dropout(x, 0.3, true);
    manual_seed(5);
    expect_matches(dropout(x.to(kCUDA), 0.3, true), y);
  }
}

TEST(Cuda, FingerprintsEqualCpu) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Sizes around the block size and past one grid (65535 blocks x 256 threads), every dtype, and
  // a view, which is fingerprinted in its own element order.
  for (int64_t n : {1, 255, 257, 100003, 65535 * 256 + 77}) {
    for (DType dtype : kAllDTypes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      const Tensor x = sample({n}, dtype);
      EXPECT_EQ(fingerprint(x.to(kCUDA)), fingerprint(x));
    }
  }
  const Tensor m = randn({33, 70});
  EXPECT_EQ(fingerprint(m.to(kCUDA).t()), fingerprint(m.t()));
}

TEST(Cuda, MemoryStatsAreExact) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const MemoryStats before = memory::stats(kCUDA);
  {
    Tensor a = empty({1000}, TensorOptions(kFloat32).with_device(kCUDA));  // 4000 bytes
    Tensor b = zeros({3, 5}, TensorOptions(kInt64).with_device(kCUDA));   // 120 bytes
    Tensor c = ones({7}, TensorOptions(kUInt8).with_device(kCUDA));       // 7 bytes
    const MemoryStats during = memory::stats(kCUDA);
    EXPECT_EQ(during.live_bytes, before.live_bytes + 4127);
    EXPECT_EQ(during.live_count, before.live_count + 3);
    EXPECT_GE(during.peak_bytes, before.live_bytes + 4127);
    EXPECT_GT(during.reserved_bytes, 0);
  }
  const MemoryStats after = memory::stats(kCUDA);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.live_count, before.live_count);
  // The freed blocks stay cached until empty_cache gives them back.
  memory::empty_cache(kCUDA);
  EXPECT_EQ(memory::stats(kCUDA).live_bytes, before.live_bytes);
  cuda::synchronize();
}

// The same dtype, shape and bytes, the CUDA tensor copied back (-0 is not +0 here).
void expect_same_bits(const Tensor& cuda_result, const Tensor& cpu_result, const std::string& what) {
  ASSERT_TRUE(cuda_result.device().is_cuda()) << what;
  ASSERT_EQ(cuda_result.dtype(), cpu_result.dtype()) << what;
  ASSERT_EQ(cuda_result.shape(), cpu_result.shape()) << what;
  const Tensor got = cuda_result.to(kCPU).contiguous(), want = cpu_result.contiguous();
  if (want.nbytes() == 0) return;  // empty: no data pointer to compare
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0) << what << " differs";
}

// The fused optimizer step: one launch per group and dtype gives the CPU kernel's bits (both
// compile the rules of core/kernel_bodies/optimizer_updates.h without contraction, Note
// [Replaying the composed update's rounding]), for every optimizer, over steps where one
// parameter has no grad, with pieces of parameters bigger and smaller than a block's.
TEST(Cuda, FusedOptimizerStepMatchesCpuBitwise) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::vector<std::pair<std::string, Make>> optimizers = {
      {"SGD nesterov", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             std::move(p), optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01).maximize(true));
       }},
      {"SGD dampened", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1).momentum(0.9).dampening(0.3));
       }},
      {"Adam", [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(0.01).weight_decay(0.05).amsgrad(true));
       }},
      {"AdamW", [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.01).amsgrad(true));
       }},
      {"RMSprop", [](std::vector<Tensor> p) {
         return std::make_unique<optim::RMSprop>(
             std::move(p), optim::RMSpropOptions(0.01).weight_decay(0.01).centered(true).momentum(0.5));
       }},
      {"Adagrad", [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adagrad>(std::move(p),
                                                 optim::AdagradOptions(0.1).lr_decay(0.1).weight_decay(0.01));
       }},
  };
  const std::vector<Shape> shapes = {{3, 5000}, {17}, {20000}, {1}, {0}, {129, 7}};
  for (const auto& [name, make] : optimizers)
    for (DType dtype : {kFloat32, kFloat64}) {
      const std::string what = name + ", " + dtype_name(dtype);
      manual_seed(0);
      std::vector<Tensor> cpu, gpu;
      for (const Shape& shape : shapes) {
        cpu.push_back(randn(shape, dtype).requires_grad_());
        gpu.push_back(cpu.back().detach().to(kCUDA).requires_grad_());
      }
      auto on_cpu = make(cpu), on_gpu = make(gpu);
      for (int k = 0; k < 3; ++k) {
        for (size_t i = 0; i < shapes.size(); ++i) {
          const Tensor g = i == 3 && k == 1 ? Tensor() : randn(shapes[i], dtype);
          cpu[i].set_grad(g);
          gpu[i].set_grad(g.defined() ? g.to(kCUDA) : g);
        }
        on_cpu->step();
        on_gpu->step();
      }
      for (size_t i = 0; i < shapes.size(); ++i)
        expect_same_bits(gpu[i], cpu[i], what + ", parameter " + std::to_string(i));
      const optim::StateDict cpu_state = on_cpu->state_dict(), gpu_state = on_gpu->state_dict();
      ASSERT_EQ(gpu_state.size(), cpu_state.size()) << what;
      for (const auto& [key, value] : cpu_state) {
        if (gpu_state.at(key).device().is_cpu()) {  // the groups' entries and the step counters
          EXPECT_EQ(gpu_state.at(key).to_vector<double>(), value.to_vector<double>()) << what << ", " << key;
          continue;
        }
        expect_same_bits(gpu_state.at(key), value, what + ", " + key);
      }
    }
}

// GradScaler's fused unscale (Note [Unscaling gradients in one pass]): the CPU kernel's bits for
// every floating dtype, a gradient past one launch's blocks, found_inf raised by a NaN on the
// device; and a scaler over an optimizer whose parameters are on both devices skips the step
// when only the CUDA gradient overflowed.
// CUDA autocast (Note [Autocast's table]): every op-table row's output dtype is PyTorch's on a
// GPU (tests/fixtures/autocast_cuda_dtypes.txt, float16 the region's default), and a weight's
// gradient comes back in float32 through one cached cast.
TEST(Cuda, AutocastDtypesArePyTorchs) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testutil::expect_autocast_dtypes("autocast_cuda_dtypes.txt", kCUDA,
                                   {{{kFloat32, kFloat16}, {kFloat32, kBFloat16}, {kFloat16, kFloat16}}});
  expect_error([] {
    Autocast autocast(DeviceType::CUDA);
    const Tensor p = rand({4}, TensorOptions(kFloat32).with_device(kCUDA));
    binary_cross_entropy(p, p);
  }, "[binary_cross_entropy] is refused under CUDA autocast");
  // Devices mixed under autocast: the cast leaves the CPU tensor alone, and the op refuses the pair.
  expect_error([] {
    Autocast autocast(DeviceType::CUDA);
    matmul(ones({2, 3}, TensorOptions(kFloat32).with_device(kCUDA)), ones({3, 2}));
  }, "[matmul] expected tensors on one device");

  const Tensor w = randn({4, 3}, TensorOptions(kFloat32).with_device(kCUDA)).requires_grad_();
  const Tensor x = randn({5, 3}, TensorOptions(kFloat32).with_device(kCUDA));
  Tensor loss;
  {
    Autocast autocast(DeviceType::CUDA);
    const Tensor y = linear(x, w) + linear(x * 2.0, w);
    EXPECT_EQ(y.dtype(), kFloat16);
    EXPECT_EQ(autocast::cached_casts(), 1u);
    loss = sum(y);  // float32 on CUDA
    EXPECT_EQ(loss.dtype(), kFloat32);
  }
  loss.backward();
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  // d/dw sum(x w^T + 2x w^T) = 3 * column sums of x, to float16's precision of the products
  expect_matches(w.grad(), (sum(x, {0}, true).expand({4, 3}) * 3.0).to(kCPU), 2e-3);
}

TEST(Cuda, GradScalerUnscaleMatchesCpuBitwise) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  NoGradGuard no_grad;
  manual_seed(3);
  for (bool poisoned : {false, true}) {
    std::vector<Tensor> cpu = {randn({3000, 700}) * 100.0, randn({5}, kFloat64), randn({9, 4}).to(kBFloat16),
                               randn({6, 8}).to(kFloat16), zeros({0})};
    if (poisoned) cpu[2].select(0, 7).fill_(std::numeric_limits<double>::quiet_NaN());
    std::vector<Tensor> gpu;
    for (const Tensor& g : cpu) gpu.push_back(g.to(kCUDA));
    const Tensor cpu_found = zeros({1}), gpu_found = zeros({1}, TensorOptions(kFloat32).with_device(kCUDA));
    non_finite_check_and_unscale_(cpu, cpu_found, 1.0 / 4096.0);
    non_finite_check_and_unscale_(gpu, gpu_found, 1.0 / 4096.0);
    EXPECT_EQ(gpu_found.item(), poisoned ? 1.0 : 0.0);
    EXPECT_EQ(cpu_found.item(), gpu_found.item());
    for (size_t i = 0; i < cpu.size(); ++i) expect_same_bits(gpu[i], cpu[i], "gradient " + std::to_string(i));
  }
}

TEST(Cuda, GradScalerSkipsWhenOneDeviceOverflows) {
  if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor on_cpu = ones({4}).requires_grad_();
  const Tensor on_gpu = ones({4}, TensorOptions(kFloat32).with_device(kCUDA)).requires_grad_();
  optim::SGD opt({on_cpu, on_gpu}, optim::SGDOptions(0.5));
  optim::GradScaler scaler;
  for (double gpu_factor : {std::numeric_limits<double>::infinity(), 1.0}) {
    opt.zero_grad();
    const Tensor loss = sum(on_cpu) + sum(on_gpu * gpu_factor).to(kCPU);
    scaler.scale(loss).backward();
    EXPECT_EQ(scaler.step(opt), std::isfinite(gpu_factor));
    scaler.update();
  }
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  EXPECT_EQ(on_cpu.detach().to_vector<float>(), std::vector<float>(4, 0.5f));
  EXPECT_EQ(on_gpu.detach().to(kCPU).to_vector<float>(), std::vector<float>(4, 0.5f));
}

TEST(Cuda, EmptySlotIsAClearError) {
  // Every op has a CUDA kernel now, so a slot of its own shows what a missing one says.
  const kernels::Kernel<kernels::FillFn> probe{"probe"};
  const std::string message = error_of([&] { probe[kCUDA]; });
  EXPECT_NE(message.find("[probe] has no CUDA kernel"), std::string::npos) << message;
}

// --- large sizes: skipped unless EMBER_LARGE_TESTS=1 (scripts/gpu-check sets it on a GPU) ---
//
// Note [Large-size CUDA tests]
// Index arithmetic that overflows 32 bits, grids past their limits and reductions over hundreds
// of millions of elements fail only at sizes that take gigabytes of device memory and seconds of
// CPU time for the reference, so these tests run only when asked for (up to ~45 GB of device
// memory: an H100/H200-class GPU). Each compares with the CPU on the tensors themselves or, where
// a CPU reference of the whole would be slow, on slices that sit past the 32-bit boundaries.

namespace {

// Skips unless the large tests may run; frees what earlier tests left in the device's cache, so
// the tests' gigabytes do not add up.
class CudaLarge : public testing::Test {
 protected:
  void SetUp() override {
    if (!ember::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    const char* flag = std::getenv("EMBER_LARGE_TESTS");
    if (flag == nullptr || std::string(flag) != "1") {
      GTEST_SKIP() << "a large-size test: set EMBER_LARGE_TESTS=1 to run it";
    }
    memory::empty_cache(kCUDA);
  }
};

// max |got - want| / (1 + |want|) over the elements (got on the GPU, want on the CPU; infinite
// where one is NaN and the other not): one number instead of millions of failure lines.
double max_error(const Tensor& got_cuda, const Tensor& want_cpu) {
  EXPECT_TRUE(got_cuda.device().is_cuda());
  EXPECT_EQ(got_cuda.shape(), want_cpu.shape());
  const std::vector<double> got = got_cuda.to(kCPU).to_vector<double>(), want = want_cpu.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) {
      if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i])));
  }
  return worst;
}

std::vector<double> values_of(const Tensor& t) { return t.to(kCPU).to_vector<double>(); }

const TensorOptions kOnGpu = TensorOptions(kFloat32).with_device(kCUDA);

}  // namespace

TEST_F(CudaLarge, PastTwoTo31Elements) {
  const int64_t n = (int64_t{1} << 31) + 1001;
  const Tensor a = full({n}, 3.0, TensorOptions(kUInt8).with_device(kCUDA));
  const Tensor b = a + a;
  EXPECT_EQ(values_of(b.narrow(0, (int64_t{1} << 31) - 2, 4)), std::vector<double>(4, 6.0));  // across 2^31
  EXPECT_EQ(values_of(b.narrow(0, n - 3, 3)), std::vector<double>(3, 6.0));
  EXPECT_EQ(sum(b).item(), 6.0 * static_cast<double>(n));  // int64 sum: exact
  const Tensor x = full({n}, 0.5, kOnGpu) * 4.0;
  EXPECT_EQ(max(x).item(), 2.0);
  EXPECT_EQ(min(x).item(), 2.0);
  // A strided view whose offsets pass 2^31: every other element of x, written in place.
  x.slice(0, 1, n, 2).fill_(-1.0);
  EXPECT_EQ(values_of(x.narrow(0, n - 4, 4)), (std::vector<double>{-1.0, 2.0, -1.0, 2.0}));  // n - 4 is odd
  const double want = 2.0 * static_cast<double>((n + 1) / 2) - static_cast<double>(n / 2);
  EXPECT_NEAR(sum(x).item(), want, 1e-5 * want);  // a float32 sum: rounded, so not exact
}

TEST_F(CudaLarge, SoftmaxAndCrossEntropyOver70000Rows) {
  // More rows than a grid dimension has blocks (65535).
  const Tensor x = randn({70000, 37}) * 5.0, gx = x.to(kCUDA);
  EXPECT_LE(max_error(softmax(gx, 1), softmax(x, 1)), 1e-6);
  EXPECT_LE(max_error(log_softmax(gx, 1), log_softmax(x, 1)), 1e-5);
  const Tensor columns = randn({37, 70000});
  EXPECT_LE(max_error(softmax(columns.to(kCUDA), 0), softmax(columns, 0)), 1e-6);
  const Tensor target = randint(0, 37, {70000});
  const Tensor logits = x.detach().requires_grad_(), glogits = gx.detach().requires_grad_();
  const Tensor loss = cross_entropy(logits, target), gloss = cross_entropy(glogits, target.to(kCUDA));
  EXPECT_LE(max_error(gloss, loss), 1e-5);
  loss.backward();
  gloss.backward();
  EXPECT_LE(max_error(glogits.grad(), logits.grad()), 1e-6);
}

TEST_F(CudaLarge, SumAndArgmaxOf3e8Elements) {
  const int64_t n = 300'000'000, peak = n - 12345;
  const Tensor gx = rand({n}, kOnGpu);  // in [0, 1): the 2 below is the one maximum
  gx.narrow(0, peak, 1).fill_(2.0);
  const Tensor x = gx.to(kCPU);
  const double want = sum(x).item();
  EXPECT_NEAR(sum(gx).item(), want, 1e-5 * want);
  EXPECT_EQ(argmax(gx, 0).item(), static_cast<double>(peak));
  EXPECT_EQ(max(gx).item(), 2.0);
  // Rows of 1e8: a few long reductions at once.
  const Tensor rows = gx.view({3, n / 3});
  EXPECT_LE(max_error(sum(rows, {1}), sum(x.view({3, n / 3}), {1})), 1e-5);
  const std::vector<double> row_peaks = values_of(argmax(rows, 1));
  EXPECT_EQ(row_peaks, values_of(argmax(x.view({3, n / 3}), 1)));
  EXPECT_EQ(row_peaks[2], static_cast<double>(peak - 2 * (n / 3)));
}

TEST_F(CudaLarge, BatchNormOver2To24ElementsPerChannel) {
  // N * H * W = 256 * 256 * 256 = 2^24 values per channel, through ember's kernels (not cuDNN's).
  const cuda::CudnnSwitchGuard ember_kernels(false);
  const Tensor x = (randn({256, 3, 256, 256}, kOnGpu) * 3.0 + 1.0).to(kCPU);
  const std::vector<Tensor> cpu = leaves_on({x, randn({3}), randn({3})}, kCPU);
  const std::vector<Tensor> gpu = leaves_on({cpu[0], cpu[1], cpu[2]}, kCUDA);
  const Tensor running_mean = zeros({3}), running_var = ones({3});
  const Tensor grunning_mean = running_mean.to(kCUDA), grunning_var = running_var.to(kCUDA);
  const Tensor y = batch_norm(cpu[0], running_mean, running_var, cpu[1], cpu[2], true);
  const Tensor gy = batch_norm(gpu[0], grunning_mean, grunning_var, gpu[1], gpu[2], true);
  EXPECT_LE(max_error(gy, y), 1e-4);
  EXPECT_LE(max_error(grunning_mean, running_mean), 1e-5);
  EXPECT_LE(max_error(grunning_var, running_var), 1e-5);
  const Tensor r = randn(y.shape(), kOnGpu).to(kCPU);
  sum(y * r).backward();
  sum(gy * r.to(kCUDA)).backward();
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(testing::Message() << "gradient of input " << i);
    EXPECT_LE(max_error(gpu[i].grad(), cpu[i].grad()), 1e-4);
  }
}

TEST_F(CudaLarge, Im2colPast2To32ColumnElements) {
  const cuda::CudnnSwitchGuard ember_kernels(false);  // im2col, not cuDNN
  // Columns [512, 64 * 3 * 3, 128 * 128]: 4.8e9 elements (19 GB), the last samples' entries past
  // 2^32. The output gradient is zero except for samples 0 and 511, so the CPU reference needs
  // only those two samples: the weight gradient comes from them alone.
  const int64_t n = 512, last = n - 1;
  const Tensor gx = randn({n, 64, 128, 128}, kOnGpu).requires_grad_();
  const Tensor gw = (randn({2, 64, 3, 3}, kOnGpu) * 0.1).requires_grad_();
  const Tensor gy = conv2d(gx, gw, Tensor(), {1, 1}, {1, 1});
  const Tensor r_first = randn({1, 2, 128, 128}, kOnGpu), r_last = randn({1, 2, 128, 128}, kOnGpu);
  sum(gy * cat({r_first, zeros({n - 2, 2, 128, 128}, kOnGpu), r_last}, 0)).backward();

  const Tensor x = cat({gx.detach().narrow(0, 0, 1), gx.detach().narrow(0, last, 1)}, 0).to(kCPU).requires_grad_();
  const Tensor w = gw.detach().to(kCPU).requires_grad_();
  const Tensor y = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  sum(y * cat({r_first, r_last}, 0).to(kCPU)).backward();
  EXPECT_LE(max_error(cat({gy.detach().narrow(0, 0, 1), gy.detach().narrow(0, last, 1)}, 0), y.detach()), 1e-4);
  EXPECT_LE(max_error(cat({gx.grad().narrow(0, 0, 1), gx.grad().narrow(0, last, 1)}, 0), x.grad()), 1e-4);
  EXPECT_LE(max_error(gw.grad(), w.grad()), 1e-4);
  EXPECT_EQ(max(abs(gx.grad().narrow(0, 1, n - 2))).item(), 0.0);  // no gradient where none flowed
}

TEST_F(CudaLarge, IndexAddWithRepeatedIndices) {
  // The adjoints of index_select (index_add) and gather (scatter_add), each destination hit
  // hundreds of times. Integer values in float64 add up exactly in any order; the float32 run
  // checks the same sums with random values.
  const Tensor rows = randint(0, 500, {100000});
  const Tensor same_row = full({20000}, 7.0, kInt64);
  const Tensor picks = randint(0, 500, {64, 20000});
  for (DType dtype : {kFloat64, kFloat32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const bool exact = dtype == kFloat64;
    auto values = [&](const Shape& shape) {
      return exact ? randint(-3, 4, shape).to(dtype) : randn(shape).to(dtype);
    };
    auto compare = [&](const TensorFn& fn, const Tensor& input) {
      const std::vector<Tensor> cpu = leaves_on({input}, kCPU), gpu = leaves_on({input}, kCUDA);
      const Tensor out = fn(cpu), gout = fn(gpu);
      const Tensor r = values(out.shape());
      sum(out * r).backward();
      sum(gout * r.to(kCUDA)).backward();
      EXPECT_LE(max_error(gpu[0].grad(), cpu[0].grad()), exact ? 0.0 : 1e-5);
    };
    compare([&](const std::vector<Tensor>& v) { return index_select(v[0], 0, rows.to(v[0].device())); },
            values({500, 16}));
    compare([&](const std::vector<Tensor>& v) { return index_select(v[0], 1, same_row.to(v[0].device())); },
            values({3, 10, 5}));
    compare([&](const std::vector<Tensor>& v) { return gather(v[0], 1, picks.to(v[0].device())); }, values({64, 500}));
  }
}

TEST_F(CudaLarge, AllocatorReusesBlocksWithKernelsQueued) {
  // Blocks freed while kernels that read them are still queued, then handed out again and
  // overwritten: on one stream the new writes run after the old reads (Note [One stream per
  // device]), so the sums below see only the old values.
  const int64_t n = int64_t{1} << 26;
  const Tensor big = randn({8192, 8192}, kOnGpu);
  const Tensor slow = matmul(big, big);  // tens of milliseconds of work ahead of everything below
  Tensor acc = zeros({n}, kOnGpu);
  {
    const Tensor ones_block = full({n}, 1.0, kOnGpu);
    for (int i = 0; i < 50; ++i) acc = acc + ones_block;  // each step frees the previous acc
  }
  const MemoryStats before = memory::stats(kCUDA);
  const Tensor overwrite = full({n}, 100.0, kOnGpu);  // takes a cached block, likely ones_block's
  const Tensor another = full({n}, -7.0, kOnGpu);
  EXPECT_GE(memory::stats(kCUDA).cache_hits, before.cache_hits + 2);
  EXPECT_EQ(min(acc).item(), 50.0);
  EXPECT_EQ(max(acc).item(), 50.0);
  EXPECT_EQ(min(overwrite).item(), 100.0);
  EXPECT_EQ(max(another).item(), -7.0);
  EXPECT_TRUE(std::isfinite(sum(slow).item()));
}
