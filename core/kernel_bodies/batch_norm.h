#pragma once
// Batch normalisation's per-element math, shared by core/cpu/batch_norm.cpp and cuda/batch_norm.cu, and the
// index walks the CUDA kernels use instead of dividing per element. tests/test_kernel_bodies.cpp
// runs all of it on the CPU against naive loops.
//
// Note [Batch-norm indexing]
// x is [n, c, s]. Element j of channel ch is at (j / s) * c * s + ch * s + j % s, and flat
// element i belongs to channel (i / s) % c. A CUDA thread walks j (or i) in steps of the block
// (or grid) size, so it takes the quotient and remainder once, when it starts, and then steps
// them like the digits of a mixed-radix counter: add the step's digits, carry once. No division
// in the loop (64-bit division is a call of ~70 instructions on a GPU).
#include <cstdint>

#include "core/kernel_bodies/host_device.h"

namespace ember::batch_norm_bodies {

// Element j, j + step, j + 2 step, ... of channel ch: `offset` is the current element's flat
// offset in x (see the Note).
struct ChannelWalk {
  int64_t offset, pos, s, step_pos, step_offset, wrap;
  EMBER_HOST_DEVICE ChannelWalk(int64_t j, int64_t ch, int64_t c, int64_t s_, int64_t step)
      : offset((j / s_) * c * s_ + ch * s_ + j % s_),
        pos(j % s_),
        s(s_),
        step_pos(step % s_),
        step_offset((step / s_) * c * s_ + step % s_),
        wrap(c * s_ - s_) {}
  EMBER_HOST_DEVICE void advance() {
    pos += step_pos;
    offset += step_offset;
    if (pos >= s) {  // into the next sample: c * s further, s back
      pos -= s;
      offset += wrap;
    }
  }
};

// The channel of flat element i, i + step, i + 2 step, ... of [n, c, s] (see the Note).
struct ChannelOf {
  int64_t channel, pos, c, s, step_pos, step_channel;
  EMBER_HOST_DEVICE ChannelOf(int64_t i, int64_t c_, int64_t s_, int64_t step)
      : channel((i / s_) % c_), pos(i % s_), c(c_), s(s_), step_pos(step % s_), step_channel((step / s_) % c_) {}
  EMBER_HOST_DEVICE void advance() {
    pos += step_pos;
    int64_t carry = 0;
    if (pos >= s) {
      pos -= s;
      carry = 1;
    }
    channel += step_channel + carry;  // < 2c: one wrap at most
    if (channel >= c) channel -= c;
  }
};

// out = x * scale + shift for every element of channel ch, with scale = invstd * weight and
// shift = bias - mean * scale (weight and bias may be null).
template <class T>
struct Affine {
  T scale, shift;
};
template <class T>
EMBER_HOST_DEVICE Affine<T> affine(const T* mean, const T* invstd, const T* weight, const T* bias, int64_t ch) {
  const T scale = invstd[ch] * (weight ? weight[ch] : T(1));
  return {scale, (bias ? bias[ch] : T(0)) - mean[ch] * scale};
}
template <class T>
EMBER_HOST_DEVICE T apply(T x, const Affine<T>& a) {
  return x * a.scale + a.shift;
}

// The backward's grad_x of one channel is a * g - b - cx * (x - mean) (Note [Batch-norm
// backward] in core/cpu/batch_norm.cpp), from the channel's sums over its `count` elements:
// sum_g = sum(g) and sum_g_xhat = sum(g * xhat).
template <class T>
struct GradInput {
  T a, b, cx;
};
template <class T>
EMBER_HOST_DEVICE GradInput<T> grad_input_coefficients(double sum_g, double sum_g_xhat, double invstd, double weight,
                                                       double count) {
  const double k = weight * invstd / count;
  return {static_cast<T>(k * count), static_cast<T>(k * sum_g), static_cast<T>(k * invstd * sum_g_xhat)};
}
template <class T>
EMBER_HOST_DEVICE T grad_input(const GradInput<T>& k, T mean, T g, T x) {
  return k.a * g - k.b - k.cx * (x - mean);
}

// Thread i of [n, c, s] in channel ch: out[i] = apply(x[i], the channel's affine).
template <class T>
struct ApplyBody {
  const T *x, *mean, *invstd, *weight, *bias;  // weight and bias may be null
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t i, int64_t ch) const {
    out[i] = apply(x[i], affine(mean, invstd, weight, bias, ch));
  }
};

// Thread i of [n, c, s] in channel ch: grad_x[i] from the channel's coefficients.
template <class T>
struct GradInputBody {
  const T *g, *x, *mean;
  const GradInput<T>* coefficients;  // [c]
  T* grad_x;
  EMBER_HOST_DEVICE void operator()(int64_t i, int64_t ch) const {
    grad_x[i] = grad_input(coefficients[ch], mean[ch], g[i], x[i]);
  }
};

}  // namespace ember::batch_norm_bodies
