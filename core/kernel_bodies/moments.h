#pragma once
// The mean and the (biased) variance of a set of values from sums taken around a shift: the one
// method of batch norm and layer norm, on both devices. Each device brings only how it takes the
// sums (lanes on a CPU thread, a block reduction on the GPU).
//
// Note [Shifted moments]
// One pass over the values gives the sums of d and d^2 for d = x - shift, in double, with the
// shift one of the values (the first of the row or channel), and then
//   mean = shift + sum(d) / n,   var = sum(d^2) / n - (sum(d) / n)^2.
// The textbook one-pass formula E[x^2] - E[x]^2 cancels badly when the mean is large next to the
// spread: the variance is then the small difference of two large numbers. Shifting by one of the
// values makes both terms of the size of the spread, and double carries 29 more bits than a
// float32 input. (Welford's update is also one pass and stable, but it divides for every element
// and does not vectorise; two passes, the mean first, read the values twice.) Rounding can still
// leave a tiny negative variance: it is clamped to 0.
#include <cmath>
#include <cstdint>

#include "core/kernel_bodies/host_device.h"

namespace ember::math {

// d = x - shift, the term whose sum and square sum give the moments.
template <class T>
EMBER_HOST_DEVICE double centred(T x, double shift) {
  return static_cast<double>(x) - shift;
}

struct Moments {
  double mean, var;  // var: biased (divided by n), >= 0
};

// The moments of n values from sum(d) and sum(d^2) (see the Note).
EMBER_HOST_DEVICE Moments shifted_moments(double shift, double sum, double sum_sq, int64_t n) {
  const double offset = sum / static_cast<double>(n);
  // One fma, written out: a compiler may contract `a - b * c` on one device and not on the other
  // (GCC does on the CPU's FMA paths, nvcc on the GPU), which would round the two differently.
  const double var = fma(-offset, offset, sum_sq / static_cast<double>(n));
  return {shift + offset, var > 0 ? var : 0.0};
}

}  // namespace ember::math
