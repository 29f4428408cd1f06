#pragma once
// Batch norm's statistics on every device are one function, Note [Shifted moments]
// (core/kernel_bodies/moments.h): the check that test_kernel_bodies runs on the CPU and test_cuda
// on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/kernel_bodies/moments.h"
#include "core/kernels.h"
#include "core/ops.h"

namespace ember::testutil {

// The values are multiples of 1/8 around 1000, so every sum of d and d^2 is exact in double in any
// order: the device's mean and variance must then be bitwise what the shared function gives from
// sums taken here, whatever order its own reduction adds in (lanes, blocks, pieces).
inline void expect_batch_norm_stats_are_the_shared_moments(Device device) {
  const int64_t n = 3, c = 4, s = 37;
  std::vector<double> v(static_cast<size_t>(n * c * s));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 1000.0 + static_cast<double>(static_cast<int64_t>(i * 7919 % 1025) - 512) / 8;
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const TensorOptions options = TensorOptions(dtype).with_device(device);
    const Tensor x = from_vector(v, {n, c, s}, dtype).to(device);
    const Tensor mean = empty({c}, options), var = empty({c}, options);
    kernels::batch_norm_stats[device](x, n, c, s, mean, var);
    const std::vector<double> got_mean = mean.to_vector<double>(), got_var = var.to_vector<double>();
    for (int64_t ch = 0; ch < c; ++ch) {
      const double shift = v[static_cast<size_t>(ch * s)];
      double sum = 0, sum_sq = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < s; ++j) {
          const double d = math::centred(v[static_cast<size_t>((i * c + ch) * s + j)], shift);
          sum += d;
          sum_sq += d * d;
        }
      const math::Moments m = math::shifted_moments(shift, sum, sum_sq, n * s);
      // The expected values rounded to the dtype as the kernel stores them.
      const Tensor expected = from_vector({m.mean, m.var}, {2}, kFloat64).to(dtype);
      EXPECT_EQ(got_mean[static_cast<size_t>(ch)], expected.to_vector<double>()[0]) << "channel " << ch;
      EXPECT_EQ(got_var[static_cast<size_t>(ch)], expected.to_vector<double>()[1]) << "channel " << ch;
    }
  }
}

}  // namespace ember::testutil
