#pragma once
// scaled_dot_product_attention's fused path (core/ops/fused_attention.cpp), for the dispatch in
// core/ops/attention.cpp. Inside the library: the public entry is scaled_dot_product_attention.
#include <string>

#include "core/attention_backend.h"
#include "core/tensor.h"

namespace ember::ops {

// Why the fused kernels cannot take this call, or "" when they can. The arguments are checked
// already (attention.cpp).
std::string fused_attention_refusal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    AttentionBackend backend);

// softmax(scale * q k^T + mask) v with dropout of the weights, on the fused kernels: saves q, k,
// v, the output and each row's log-sum-exp, nothing of size [..., L, S].
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
                       bool is_causal, double scale);

}  // namespace ember::ops
