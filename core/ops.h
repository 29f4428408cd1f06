#pragma once
// Every differentiable op of the core, grouped as in core/ops/*.cpp (one file per family,
// forward and backward side by side). Shapes broadcast with NumPy/PyTorch rules; binary ops on
// two dtypes compute in the wider one (uint8 < int64 < float32 < float64). Comparisons return
// uint8 masks (0/1) and carry no gradient.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/attention_backend.h"  // which path scaled_dot_product_attention runs
#include "core/cpu_settings.h"  // the CPU settings were declared here; still reachable through ops.h
#include "core/tensor.h"

namespace ember {

// --- elementwise (core/ops/elementwise.cpp) ---
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// a^b. Where the textbook slope is 0 * inf on a constant (x^0, 0^b for b >= 0) the gradient is 0,
// as PyTorch's (Note [Pow at zero]).
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& x, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add_scalar(const Tensor& x, double value);  // x + value
Tensor mul_scalar(const Tensor& x, double value);  // x * value
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // gradient 0, as PyTorch's
// Scalar bounds, either of which may be left out (clamp(x, std::nullopt, 1.0) is clamp_max(x, 1.0));
// leaving out both is an error, as in PyTorch. min > max gives max everywhere and a NaN bound NaN,
// as in PyTorch. The gradient passes strictly between the bounds: 0 on a bound, as PyTorch 2.15
// (Note [Clamp's gradient on a bound]). An integer x stays integer when the bounds are integers
// its dtype holds (clamping ids) and computes in float32 otherwise.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor clamp_min(const Tensor& x, double min);
Tensor clamp_max(const Tensor& x, double max);
// Bounds as tensors that broadcast with x; either may be undefined (no bound: then clamp is
// maximum(x, min) or minimum(x, max)). Where min > max the result is max, and a NaN anywhere gives
// NaN. Gradient as PyTorch 2.15's: to x strictly inside, to min or max where it is the result, and
// split in halves where x equals a bound (Note [Clamp's gradient on a bound]).
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
// The exact (erf) form, PyTorch's default, or the tanh approximation GPT-2 was trained with
// (F.gelu(x, approximate="tanh")): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
enum class GeluApproximate { None, Tanh };
// Two overloads rather than a default argument, so that &gelu still names the one-tensor form.
Tensor gelu(const Tensor& x);
Tensor gelu(const Tensor& x, GeluApproximate approximate);
Tensor silu(const Tensor& x);  // x * sigmoid(x)
// condition is a uint8 mask; condition, a and b broadcast together.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// x where mask is 0, value where it is 1; the uint8 mask broadcasts to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& x, double s);
Tensor operator+(double s, const Tensor& x);
Tensor operator-(const Tensor& x, double s);
Tensor operator-(double s, const Tensor& x);
Tensor operator*(const Tensor& x, double s);
Tensor operator*(double s, const Tensor& x);
Tensor operator/(const Tensor& x, double s);
Tensor operator/(double s, const Tensor& x);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double s);
Tensor operator!=(const Tensor& a, double s);
Tensor operator<(const Tensor& a, double s);
Tensor operator<=(const Tensor& a, double s);
Tensor operator>(const Tensor& a, double s);
Tensor operator>=(const Tensor& a, double s);

// --- reductions (core/ops/reduce.cpp); dims may be negative, empty dims = all. Sums of
// integral tensors are int64. ---
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
// amax semantics: the gradient is shared evenly between tied maxima
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, no gradient
// Variance over dims: sum((x - mean)^2) / (N - correction), N the number of reduced elements;
// correction = 1 is the unbiased estimator (PyTorch's default). N <= correction divides by zero
// (inf or NaN), as PyTorch. stddev is sqrt(var): PyTorch's std, renamed because a function
// called std would make every unqualified std(...) ambiguous under `using namespace ember`; its
// gradient is 0 where it is 0 (all elements equal), as PyTorch's.
Tensor var(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor stddev(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// (core/ops/norm.cpp) The p-norm of x over dims (empty: all), as torch.linalg.vector_norm:
// (sum |x|^ord)^(1/ord); ord = inf is max |x|, -inf min |x|, 0 the count of nonzeros. With dtype,
// x is converted to it first (a floating dtype at least as wide as x's). 16-bit inputs compute in
// float32. The gradient where the norm is 0 is 0, PyTorch's subgradient (Note [Norm gradients]).
Tensor vector_norm(const Tensor& x, double ord = 2.0, const Shape& dims = {}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
// x / max(vector_norm(x, p, {dim}, keepdim = true), eps), as torch.nn.functional.normalize.
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
// The cosine of the angle between x1 and x2 along dim, which broadcast together, as PyTorch 2's
// F.cosine_similarity: each side is divided by its 2-norm clamped at eps before the dot product
// (Note [Cosine similarity as PyTorch 2]).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// Sums `x` down to `shape` (the inverse of broadcasting `shape` up to x's shape).
Tensor sum_to(const Tensor& x, const Shape& shape);
// (core/ops/cumsum.cpp) Running sums along dim: y_j = x_0 + ... + x_j. Integral inputs (uint8
// too) give int64, as PyTorch; floats add in double.
Tensor cumsum(const Tensor& x, int64_t dim);

// --- sorting (core/ops/sort.cpp). NaN sorts as the largest value and equal values keep their
// order (a stable sort), so results are deterministic (Note [Sort order] in core/cpu/sort.cpp).
// The values are differentiable (the gradient goes back to the positions they came from); the
// int64 indices are not. Bind both with `auto [values, indices] = sort(x);`. ---
struct ValuesAndIndices {
  Tensor values, indices;
};
ValuesAndIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);  // sort's indices
// The k largest (or smallest) elements along dim: the first k of sort(x, dim, largest). With
// sorted = false they come in the order of their positions in x (PyTorch leaves that order open).
ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// --- matmul (core/ops/matmul.cpp): 1-D, 2-D and batched with broadcast batch dims ---
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight.t() + bias (bias [out_features] or undefined), as torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// (core/ops/einsum.cpp) Einstein summation, as torch.einsum: einsum("bij,bjk->bik", {a, b}).
// Subscripts are letters; "..." stands for the dims an operand has beyond its letters; without
// "->" the output is the ellipsis dims, then the letters used once, sorted (uppercase first).
// A letter repeated in one operand takes its diagonal; size-1 dims broadcast. Any number of
// floating-point operands, contracted left to right with batched matmuls (Note [einsum as matmuls]).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// --- losses (core/ops/loss.cpp) ---
enum class Reduction { None, Mean, Sum };
// PyTorch's cross_entropy. logits [N, C] ([C] for one sample, [N, C, d1, ...] for a class per
// position) and as target either int64 class indices [N] ([N, d1, ...]) or class probabilities of
// the logits' shape and dtype; weight, optional, one per class [C]. Mean divides by the number of
// targets that are not ignore_index (by their summed weights with weight; by the number of samples
// for probabilities). [N, C] with indices and no weight runs one fused log-softmax + NLL kernel
// that keeps only a logsumexp per sample for backward (Note [Fused cross-entropy]); the rest is
// composed (Note [Cross-entropy beyond the fused kernel]).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     int64_t ignore_index = -100, double label_smoothing = 0.0, const Tensor& weight = Tensor());
// input [N, C] or [N, C, d1, ...] of log-probabilities, target int64 class indices [N] or
// [N, d1, ...]: loss = -weight[t] * input[n, t] (weight: [C] or undefined for all ones). Mean
// divides by the summed weights of the targets that are not ignore_index (PyTorch's weighted
// mean); ignored targets contribute 0.
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100, const Tensor& weight = Tensor());
// The losses below compare input and target of one shape, elementwise; mean divides by numel.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// d = |input - target|: 0.5 d^2 / beta below beta, d - 0.5 beta above (beta >= 0; beta = 0 is l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
// d = |input - target|: 0.5 d^2 below delta, delta * (d - 0.5 delta) above (delta > 0); smooth_l1 * delta.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1.0);
// Probabilities input in [0, 1] (checked on the host, as PyTorch's CPU kernel does):
// loss = -weight * (t log(x) + (1 - t) log(1 - x)), each log clamped at -100 so that x = 0 or 1
// gives a finite loss. weight broadcasts to input's shape (or is undefined).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                            const Tensor& weight = Tensor());
// binary_cross_entropy(sigmoid(input), target) computed from the logits, stable for any |x|:
// loss = weight * ((1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)). pos_weight (the weight of
// the positive term, e.g. [C] broadcast over the last, class, dim) and weight broadcast to input.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::Mean, const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor());

// --- indexing and joining (core/ops/index.cpp) ---
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views (narrow) of x along dim, differentiable. chunk cuts `chunks` pieces of ceil(size /
// chunks) elements, the last one smaller, so it may return fewer than `chunks` (as PyTorch).
// split cuts pieces of split_size (the last one smaller), or of the given sizes, which must add
// up to the size of dim.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const Shape& sizes, int64_t dim = 0);
// (core/ops/triangle.cpp) The lower (tril) or upper (triu) triangle of the last two dims, zero elsewhere: element (i, j)
// is kept when j - i <= diagonal (tril) or j - i >= diagonal (triu).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// (core/ops/pad.cpp) Pads the trailing dims; pads lists (before, after) pairs from the last dim
// backwards, as torch.nn.functional.pad: {left, right, top, bottom} pads W then H. A negative
// amount crops. Constant fills with value; reflect mirrors without repeating the edge (each
// amount < the dim's size); replicate repeats the edge; circular wraps around (each amount <=
// the size left after cropping). Any number of dims in every mode.
enum class PadMode { Constant, Reflect, Replicate, Circular };
Tensor pad(const Tensor& x, const Shape& pads, PadMode mode = PadMode::Constant, double value = 0.0);

// --- convolution, pooling, normalisation, dropout (core/ops/conv.cpp, pool.cpp, batch_norm.cpp,
// random.cpp). Images are NCHW; pairs are {height, width}. ---
using Pair = std::array<int64_t, 2>;
// x [N, C, H, W], weight [OC, C, KH, KW], bias [OC] or undefined. The CPU runs it through
// oneDNN when ember is built with it and the conv backend is OneDNN, else through ember's
// im2col + gemm (Note [Convolution through oneDNN]).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Pair stride = {1, 1},
              Pair padding = {0, 0}, Pair dilation = {1, 1});
// Padding is implicit -infinity for max and zeros for avg (counted in the divisor when
// count_include_pad, PyTorch's default).
Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding = {0, 0}, bool count_include_pad = true);
// Output cell (i, j) averages rows [floor(i*H/OH), ceil((i+1)*H/OH)) and likewise for columns.
Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size);
// The checks of conv2d's and pooling's window arguments that need no input (kernel size, stride
// and dilation >= 1, padding >= 0, a window size that fits int64), with the words the ops use;
// `op` names the caller. Layers run them when they are built.
void check_window_options(Pair kernel, Pair stride, Pair padding, Pair dilation, const char* op);
// x [N, C] or [N, C, ...]. In training, normalises with the batch statistics and, when
// running_mean/var are defined and update_running_stats, updates them in place:
//   running = (1 - momentum) * running + momentum * batch_stat (unbiased variance).
// Otherwise normalises with the running statistics (with the batch's when there are none).
// weight/bias may be undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                  bool update_running_stats = true);
// eps must be finite and > 0 (a negative eps gives NaN), momentum finite and in [0, 1]; `op` names
// the caller in the error. batch_norm and the BatchNorm modules check with this.
void check_batch_norm_options(double eps, double momentum, const char* op);
// Layer normalisation over the trailing dims given by normalized_shape: each row is normalised
// with its own mean and biased variance, then scaled by weight and shifted by bias (both of
// normalized_shape, or undefined). One fused kernel each way (Note [Layer-norm statistics]).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Inverted dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p).
// Draws from the default generator of x's device; identity when !training or p == 0.
Tensor dropout(const Tensor& x, double p, bool training = true);

// --- transformer building blocks (core/ops/embedding.cpp, core/ops/triangle.cpp, core/ops/attention.cpp) ---
// Looks up rows of a table: weight [num_embeddings, dim], indices int64 of any shape; the result
// has shape indices.shape + [dim] (PyTorch's F.embedding(indices, weight); the table comes first
// here, as in index_select(weight, 0, indices)). Ids must lie in [0, num_embeddings): indices on
// the host are checked; for indices on a GPU see Note [Embedding ids on the device]. Repeated ids
// add their gradients, deterministically on every device (Note [Embedding backward]). The row
// padding_idx (negative counts from the end) gets no gradient, as in F.embedding.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
// uint8 [size, size] mask, 1 where query i may attend to key j (j <= i): tril of ones.
Tensor causal_mask(int64_t size, Device device = kCPU);
// softmax(q @ k^T * scale + mask) @ v over q [..., L, E], k [..., S, E], v [..., S, Ev] (equal
// leading dims) -> [..., L, Ev], with torch.nn.functional.scaled_dot_product_attention's arguments
// and semantics. attn_mask broadcasts to [..., L, S]: uint8 (ember's bool: nonzero = may attend)
// or floating in the query's dtype (added to the scores). is_causal masks key j > query i (the
// top-left lower triangle of [L, S]); giving both is an error, as in PyTorch (causal_attn_mask
// makes a mask that means both). scale defaults to 1 / sqrt(E). dropout_p > 0 drops attention
// weights with that probability (always: pass 0 in eval mode, as PyTorch's modules do), drawing
// from the default generator of q's device as dropout() does. A query that may attend to no key
// gets zeros and passes no gradient, as PyTorch's math path since 2.5 (Note [Rows that attend to
// nothing]). It runs on the fused kernels where they take the call, else on the math path
// (core/attention_backend.h): the fused op keeps q, k, v, its output and a number per query row
// for backward (Note [Fused attention]); the math path also the [..., L, S] weights (Note [What
// attention saves]).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);
// The argument order before PyTorch's; causal and attn_mask together keep their old meaning (the
// mask narrowed to the causal pattern).
[[deprecated("use scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)")]]
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    const Tensor& attn_mask = Tensor(), std::optional<double> scale = std::nullopt);
// The weights scaled_dot_product_attention multiplies v by, before its dropout: [..., L, S], the
// same arguments and checks. For callers that return them (nn::MultiheadAttention's need_weights).
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask = Tensor(), bool is_causal = false,
                         std::optional<double> scale = std::nullopt);
// attn_mask (as scaled_dot_product_attention takes it) narrowed to the causal pattern of [L, S]
// scores: uint8 masks get 0 and floating ones -inf where key j > query i.
Tensor causal_attn_mask(const Tensor& attn_mask, int64_t L, int64_t S);

// --- fingerprints (core/ops/fingerprint.cpp) ---
// 64 bits that change when any element of x changes, the same on every device (Note [Tensor
// fingerprints] in core/kernel_bodies/fingerprint.h); a checksum for comparing results, not differentiable.
uint64_t fingerprint(const Tensor& x);


}  // namespace ember
