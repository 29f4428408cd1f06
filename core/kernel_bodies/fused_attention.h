#pragma once
// What the fused attention kernels of both backends share (Note [Fused attention] in
// core/ops/fused_attention.cpp): where an attention matrix finds its mask, which of its entries a
// query sees, and which ones dropout keeps. Plain C++ that nvcc also compiles.
#include <cstdint>

#include "core/kernel_bodies/host_device.h"
#include "core/kernel_bodies/philox.h"

namespace ember::kernels {

// Where mask element (i, j) of attention matrix `b` lies: the mask as the op broadcast it to
// [..., L, S], its leading dims merged where their strides allow, so that the common masks
// ([L, S], [B, 1, L, S], a key padding [B, 1, 1, S]) take one or two dims here. Broadcast dims
// have stride 0: a mask is never copied to the scores' size.
struct AttentionMaskLayout {
  static constexpr int kMaxDims = 6;
  enum class Kind : uint8_t { None, Allowed, Additive };  // none, uint8 (nonzero may attend), added to the scores
  Kind kind = Kind::None;
  int dims = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  int64_t row_stride = 0, col_stride = 0;

  // The element offset of matrix b's (0, 0): b unravelled over the leading dims, last fastest.
  EMBER_HOST_DEVICE int64_t base(int64_t b) const {
    int64_t offset = 0;
    for (int d = dims - 1; d >= 0; --d) {
      offset += b % sizes[d] * strides[d];
      b /= sizes[d];
    }
    return offset;
  }
};

// One call's attention matrices: `batch` of them, [L, S] each, queries and keys of `head_dim`
// features, values of `value_dim`.
struct AttentionSpec {
  int64_t batch = 0, L = 0, S = 0, head_dim = 0, value_dim = 0;
  double scale = 1.0;
  bool causal = false;  // query i sees keys j <= i (the top-left triangle, also for L != S)
  AttentionMaskLayout mask;
  // Dropout of the weights: element (b, i, j) is kept when the uniform number with index
  // (b * L + i) * S + j of the Philox stream (seed, offset) is >= dropout_p, and a kept weight is
  // scaled by 1 / (1 - dropout_p) (Note [Dropout regenerated per tile] in core/ops/fused_attention.cpp).
  double dropout_p = 0.0;
  uint64_t seed = 0, offset = 0;

  // How many keys of row i (from 0) are visible before the mask: all, or those j <= i.
  EMBER_HOST_DEVICE int64_t visible_keys(int64_t i) const {
    if (!causal) return S;
    return i + 1 < S ? i + 1 : S;
  }
  // Whether dropout keeps element (b, i, j).
  EMBER_HOST_DEVICE bool keeps(int64_t b, int64_t i, int64_t j) const {
    return philox::uniform(seed, offset, static_cast<uint64_t>((b * L + i) * S + j)) >= dropout_p;
  }
};

}  // namespace ember::kernels
