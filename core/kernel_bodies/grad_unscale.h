#pragma once
// Note [Unscaling gradients in one pass]
// GradScaler::unscale_ (optim/grad_scaler.h) does two things to every gradient: it divides it by
// the loss scale, and it finds out whether any element is inf or NaN (the scaled backward
// overflowed, so the step must be skipped). Written as ops that is three passes over each
// gradient (a multiply, an isfinite, an any) and a read back to the host per gradient. The kernel
// does both in one read and one write of each element, and raises one flag per device, which
// nobody reads until GradScaler::step needs the answer.
// Every element is multiplied, even once a non-finite one has been seen: the step is skipped
// then, and the gradients are what the caller inspects (PyTorch does the same).
// The product is computed in float for float32 and the 16-bit floats, and in double for float64,
// so a 16-bit gradient is rounded once.
#include <cmath>
#include <type_traits>

#include "core/kernel_bodies/host_device.h"

namespace ember::grad_unscale_bodies {

template <class T>
using UnscaleMath = std::conditional_t<std::is_same_v<T, double>, double, float>;

// g = g * inv_scale; true when g was inf or NaN before.
template <class T>
EMBER_HOST_DEVICE bool unscale_element(T& g, UnscaleMath<T> inv_scale) {
  const UnscaleMath<T> v = static_cast<UnscaleMath<T>>(g);
  g = static_cast<T>(v * inv_scale);
  return !std::isfinite(v);
}

}  // namespace ember::grad_unscale_bodies
