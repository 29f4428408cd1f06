// The float products on oneDNN's sgemm against OpenBLAS's (Note [Two BLAS for one gemm]):
// matmul in every layout the kernel passes as flags (transposed, strided rows, batches, the two
// batch levels, a shared right operand), linear with its bias accumulated, the gradients, empty
// sums, float64, and that oneDNN's result does not depend on where the operands lie; and the
// bfloat16 products on oneDNN against the staged float32 ones. Skipped in a
// build without oneDNN (EMBER_DNNL=OFF), except the choice's own checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/cpu/dnnl_matmul.h"
#include "core/generator.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::expect_within_a_bfloat16_step;
using testutil::GemmBackendScope;
using testutil::values;

namespace {

class GemmBackends : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_onednn()) GTEST_SKIP() << "built without oneDNN (EMBER_DNNL)";
  }
};

// fn's result on each backend, from the same random inputs (fn draws them after the seed).
std::pair<std::vector<Tensor>, std::vector<Tensor>> on_both(const std::function<std::vector<Tensor>()>& fn) {
  std::vector<Tensor> results[2];
  for (GemmBackend backend : {GemmBackend::OpenBLAS, GemmBackend::OneDNN}) {
    GemmBackendScope scope(backend);
    manual_seed(11);
    results[backend == GemmBackend::OneDNN] = fn();
  }
  return {results[0], results[1]};
}

// Within float32 rounding of sums of k products: relative to the largest OpenBLAS value.
void expect_close(const Tensor& onednn, const Tensor& openblas) {
  ASSERT_EQ(onednn.shape(), openblas.shape());
  const std::vector<double> got = values(onednn), want = values(openblas);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  const double tol = 2e-5 * scale + 1e-6;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

void expect_backends_agree(const std::function<std::vector<Tensor>()>& fn) {
  const auto [openblas, onednn] = on_both(fn);
  ASSERT_EQ(openblas.size(), onednn.size());
  for (size_t i = 0; i < openblas.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    expect_close(onednn[i], openblas[i]);
  }
}

TEST_F(GemmBackends, MatmulAgreesInEveryLayout) {
  // sizes around the kernels' blocking (odd, one, a little past powers of two)
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 13, 5}, {33, 1, 17}, {1, 300, 65},
                         {129, 64, 1}, {70, 257, 48}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    expect_backends_agree([&] {
      const Tensor a = randn({m, k}), b = randn({k, n});
      const Tensor at = randn({k, m}).t(), bt = randn({n, k}).t();                // column-major operands
      const Tensor wide = randn({m, k + 5}).narrow(1, 2, k);                      // a row stride past the row
      return std::vector<Tensor>{matmul(a, b), matmul(at, b), matmul(a, bt), matmul(at, bt), matmul(wide, b)};
    });
  }
}

TEST_F(GemmBackends, BatchedProductsAgree) {
  expect_backends_agree([] {
    const Tensor a = randn({4, 9, 6}), b = randn({4, 6, 11}), shared = randn({6, 11});
    // attention's head split: [b, h, t, e] views of one [b, t, 3he] projection (Note [Two batch levels])
    std::vector<Tensor> parts = chunk(randn({2, 5, 3 * 3 * 4}), 3, -1);
    for (Tensor& p : parts) p = p.reshape({2, 5, 3, 4}).transpose(1, 2);
    return std::vector<Tensor>{matmul(a, b), matmul(a, shared), matmul(randn({3, 1, 9, 6}), randn({5, 6, 2})),
                               matmul(parts[0], parts[1].transpose(-2, -1)),
                               matmul(matmul(parts[0], parts[1].transpose(-2, -1)), parts[2])};
  });
}

TEST_F(GemmBackends, LinearAndItsGradientsAgree) {
  // the bias is copied into the output and the product accumulated onto it (Note [A bias in the product])
  expect_backends_agree([] {
    const Tensor x = randn({2, 37, 19}).requires_grad_(), w = randn({23, 19}).requires_grad_();
    const Tensor bias = randn({23}).requires_grad_();
    const Tensor y = linear(x, w, bias);
    sum(y * randn(y.shape())).backward();
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), bias.grad()};
  });
}

TEST_F(GemmBackends, OneDNNDoesNotDependOnWhereTheOperandsLie) {
  // checkpointing recomputes a product on operands at other addresses and expects the same bits
  GemmBackendScope scope(GemmBackend::OneDNN);
  manual_seed(5);
  const Tensor a = randn({67, 129}), b = randn({129, 45});
  const Tensor want = matmul(a, b);
  for (int64_t offset = 1; offset < 16; ++offset) {
    const Tensor a_moved = zeros({a.numel() + offset}).narrow(0, offset, a.numel()).view(a.shape());
    const Tensor b_moved = zeros({b.numel() + 2 * offset}).narrow(0, 2 * offset, b.numel()).view(b.shape());
    a_moved.copy_(a);
    b_moved.copy_(b);
    EXPECT_EQ(values(matmul(a_moved, b_moved)), values(want)) << "offset " << offset;
  }
}

TEST_F(GemmBackends, EmptySumsAreZerosOrTheBias) {
  for (GemmBackend backend : testutil::gemm_backends()) {
    GemmBackendScope scope(backend);
    EXPECT_EQ(values(matmul(randn({3, 0}), randn({0, 4}))), std::vector<double>(12, 0.0));
    const Tensor bias = randn({4});
    const Tensor y = linear(randn({3, 0}), randn({4, 0}), bias);
    EXPECT_EQ(values(y), values(bias.expand({3, 4})));
    EXPECT_EQ(matmul(randn({0, 5}), randn({5, 4})).shape(), (Shape{0, 4}));
  }
}

TEST_F(GemmBackends, Float64RunsOnOpenBLASWhicheverIsChosen) {
  // oneDNN has no dgemm: the same bits under both choices
  const auto [openblas, onednn] = on_both([] {
    return std::vector<Tensor>{matmul(randn({31, 77}, kFloat64), randn({77, 9}, kFloat64))};
  });
  EXPECT_EQ(values(onednn[0]), values(openblas[0]));
}

// bfloat16 products (Note [bfloat16 products through oneDNN]): oneDNN's against the float32 product
// of the same bfloat16 inputs rounded once (the staged path, which the OpenBLAS choice takes).
TEST_F(GemmBackends, BFloat16ProductsMatchTheStagedFloat32Ones) {
  if (!cpu::cpu_has_bfloat16_products()) GTEST_SKIP() << "this CPU has no AVX512-BF16: bfloat16 is staged";
  const int64_t runs_before = cpu::dnnl_matmul_runs();
  const auto [staged, onednn] = on_both([] {
    const auto bf = [](const Shape& shape) { return randn(shape).to(kBFloat16); };
    const Tensor a = bf({70, 257}), b = bf({257, 48});
    std::vector<Tensor> parts = chunk(bf({2, 5, 3 * 3 * 4}), 3, -1);
    for (Tensor& p : parts) p = p.reshape({2, 5, 3, 4}).transpose(1, 2);
    const Tensor x = bf({2, 37, 19}).requires_grad_(), w = bf({23, 19}).requires_grad_();
    const Tensor bias = bf({23}).requires_grad_();
    const Tensor y = linear(x, w, bias);
    sum(y * bf(y.shape())).backward();
    return std::vector<Tensor>{matmul(a, b), matmul(bf({257, 70}).t(), b), matmul(a, bf({48, 257}).t()),
                               matmul(bf({70, 262}).narrow(1, 2, 257), b), matmul(bf({4, 9, 6}), bf({6, 11})),
                               matmul(bf({3, 1, 9, 6}), bf({5, 6, 2})), matmul(parts[0], parts[1].transpose(-2, -1)),
                               y.detach(), x.grad(), w.grad()};
  });
  EXPECT_GT(cpu::dnnl_matmul_runs(), runs_before + 9);
  for (size_t i = 0; i < staged.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    expect_within_a_bfloat16_step(onednn[i], staged[i]);
  }
}

TEST(GemmBackendChoice, OneDNNNeedsABuildWithIt) {
  if (has_onednn()) {
    GemmBackendScope scope(GemmBackend::OpenBLAS);
    EXPECT_EQ(gemm_backend(), GemmBackend::OpenBLAS);
    set_gemm_backend(GemmBackend::OneDNN);
    EXPECT_EQ(gemm_backend(), GemmBackend::OneDNN);
  } else {
    EXPECT_EQ(gemm_backend(), GemmBackend::OpenBLAS);
    expect_error([] { set_gemm_backend(GemmBackend::OneDNN); }, "built without oneDNN");
  }
}

}  // namespace
