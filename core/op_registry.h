#pragma once
// Note [The op registry]
// Every op of the public API that computes a tensor, in one list: the free functions of
// core/ops.h and the differentiable Tensor methods (views, copies, casts), each with its family.
// The list is an X-macro, so one line per op serves every use:
//   - core/op_registry.cpp checks at compile time that each name is declared (a `using` of it, so
//     an op renamed or removed without its line fails the build) and builds registered_ops();
//   - tests/test_op_table.cpp fails when a registered op has no row in the op table (or an
//     exemption with its reason), so a new op gets gradcheck, the 16-bit columns, CUDA against the
//     CPU, non-contiguous and zero-size inputs from one row;
//   - the same test reads core/ops.h's declarations once more, so an op declared there and
//     forgotten here fails too.
// Tensor methods that only forward to a free op (Tensor::sum, mean, matmul) are the free op; the
// in-place methods (add_, fill_, ...) are not recorded by autograd and are not listed.
#include <cstdint>
#include <span>
#include <string_view>

namespace ember {

enum class OpFamily : uint8_t {
  Elementwise,
  Comparison,
  Reduction,
  Sorting,
  Matmul,
  Loss,
  Indexing,
  ConvPoolNorm,
  Transformer,
  Shape,
  Fingerprint,
};

// X(name, family) for each free function of core/ops.h that is an op.
#define EMBER_FREE_OPS(X)                                                                                            \
  X(add, Elementwise) X(sub, Elementwise) X(mul, Elementwise) X(div, Elementwise) X(pow, Elementwise)                \
  X(maximum, Elementwise) X(minimum, Elementwise) X(add_scalar, Elementwise) X(mul_scalar, Elementwise)              \
  X(neg, Elementwise) X(exp, Elementwise) X(log, Elementwise) X(sqrt, Elementwise) X(rsqrt, Elementwise)             \
  X(abs, Elementwise) X(sign, Elementwise) X(clamp, Elementwise) X(clamp_min, Elementwise)                           \
  X(clamp_max, Elementwise) X(relu, Elementwise) X(leaky_relu, Elementwise) X(sigmoid, Elementwise)                  \
  X(tanh, Elementwise) X(gelu, Elementwise) X(silu, Elementwise) X(where, Elementwise) X(masked_fill, Elementwise)    \
  X(eq, Comparison) X(ne, Comparison) X(lt, Comparison) X(le, Comparison) X(gt, Comparison) X(ge, Comparison)        \
  X(sum, Reduction) X(mean, Reduction) X(max, Reduction) X(min, Reduction) X(argmax, Reduction) X(var, Reduction)    \
  X(stddev, Reduction) X(softmax, Reduction) X(log_softmax, Reduction) X(vector_norm, Reduction)                     \
  X(normalize, Reduction) X(cosine_similarity, Reduction) X(sum_to, Reduction) X(cumsum, Reduction)                  \
  X(sort, Sorting) X(argsort, Sorting) X(topk, Sorting)                                                              \
  X(matmul, Matmul) X(linear, Matmul) X(einsum, Matmul)                                                              \
  X(cross_entropy, Loss) X(nll_loss, Loss) X(mse_loss, Loss) X(l1_loss, Loss) X(smooth_l1_loss, Loss)                \
  X(huber_loss, Loss) X(binary_cross_entropy, Loss) X(binary_cross_entropy_with_logits, Loss)                        \
  X(index_select, Indexing) X(gather, Indexing) X(cat, Indexing) X(stack, Indexing) X(chunk, Indexing)               \
  X(split, Indexing) X(tril, Indexing) X(triu, Indexing) X(pad, Indexing)                                            \
  X(conv2d, ConvPoolNorm) X(max_pool2d, ConvPoolNorm) X(avg_pool2d, ConvPoolNorm)                                    \
  X(adaptive_avg_pool2d, ConvPoolNorm) X(batch_norm, ConvPoolNorm) X(layer_norm, ConvPoolNorm)                       \
  X(dropout, ConvPoolNorm)                                                                                           \
  X(embedding, Transformer) X(causal_mask, Transformer) X(scaled_dot_product_attention, Transformer)                 \
  X(attention_weights, Transformer) X(causal_attn_mask, Transformer)                                                 \
  X(fingerprint, Fingerprint)

// X(name, family) for each differentiable method of Tensor (core/tensor.h).
#define EMBER_TENSOR_METHOD_OPS(X)                                                                                   \
  X(contiguous, Shape) X(clone, Shape) X(to, Shape) X(view, Shape) X(reshape, Shape) X(transpose, Shape) X(t, Shape) \
  X(permute, Shape) X(narrow, Shape) X(slice, Shape) X(select, Shape) X(expand, Shape) X(squeeze, Shape)             \
  X(unsqueeze, Shape) X(flatten, Shape)

struct RegisteredOp {
  std::string_view name;
  OpFamily family;
  bool tensor_method;  // called as x.name(...)
};

// Every op of the two lists above, free functions first, each list in its order.
std::span<const RegisteredOp> registered_ops();
const char* op_family_name(OpFamily family);

}  // namespace ember
