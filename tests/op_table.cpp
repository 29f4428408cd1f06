// The rows of the op table (Note [The op table] in op_table.h), in the order of core/ops.h.
#include "tests/op_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "core/autocast.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/fixture.h"
#include "tests/test_helpers.h"

namespace ember::testutil {
namespace {

using V = std::vector<Tensor>;

// Piece i of a split, or an Error when the input's shape made fewer (the op-table fuzzer runs the
// rows on other shapes than their own).
const Tensor& piece(const std::vector<Tensor>& parts, size_t i) {
  EMBER_CHECK(i < parts.size(), "[op table] the split made ", parts.size(), " pieces, not ", i + 1);
  return parts[i];
}

OpRow row(std::string op, std::vector<OpInput> inputs, OpFn fn) {
  OpRow r;
  r.op = std::move(op);
  r.inputs = std::move(inputs);
  r.fn = std::move(fn);
  return r;
}
OpRow variant(std::string op, std::string what, std::vector<OpInput> inputs, OpFn fn) {
  OpRow r = row(std::move(op), std::move(inputs), std::move(fn));
  r.variant = std::move(what);
  return r;
}
// Modifiers, applied to a row: row(...) | integers_too, ...
OpRow operator|(OpRow r, OpRow (*modify)(OpRow)) { return modify(std::move(r)); }
OpRow integers_too(OpRow r) {
  r.floating_only = false;
  return r;
}
OpRow no_gradient(OpRow r) {
  r.differentiable = false;
  return r;
}
// Ops that accumulate many float32 terms (products, convolutions, long reductions).
OpRow accumulates(OpRow r) {
  r.float32_tolerance = 1e-3;
  return r;
}

OpRow with_reference(OpRow r, OpFn reference) {
  r.reference = std::move(reference);
  return r;
}

// A fixed seed inside the call, so that gradcheck's repeated calls and every dtype column see
// the same dropout mask.
Tensor seeded_dropout(const Tensor& x) {
  manual_seed(11);
  return dropout(x, 0.4);
}

// Collects the rows in make_table()'s order: add_row(row(...)).
using AddRow = std::function<void(OpRow)>;
const Shape m = {3, 4};  // the shape most rows use

// --- elementwise arithmetic (broadcasting) ---
void arithmetic_rows(const AddRow& add_row) {
  add_row(row("add", {floating(m), floating({4})}, [](const V& x) { return add(x[0], x[1]); }) | integers_too);
  add_row(row("sub", {floating(m), floating({3, 1})}, [](const V& x) { return sub(x[0], x[1]); }) | integers_too);
  add_row(variant("sub", "both broadcast", {floating({2, 1, 3}), floating({4, 1})},
                  [](const V& x) { return sub(x[0], x[1]); }) |
          integers_too);
  add_row(row("mul", {floating(m), floating(m)}, [](const V& x) { return mul(x[0], x[1]); }) | integers_too);
  add_row(variant("mul", "broadcast", {floating(m), floating({3, 1})}, [](const V& x) { return mul(x[0], x[1]); }) |
          integers_too);
  add_row(row("div", {floating(m), floating({4}, 0.5, 2.0)}, [](const V& x) { return div(x[0], x[1]); }) |
          integers_too);
  add_row(row("pow", {floating(m, 0.5, 2.0), floating({4})}, [](const V& x) { return pow(x[0], x[1]); }) |
          integers_too);
  add_row(variant("pow", "scalar exponent", {floating(m, 0.5, 2.0)}, [](const V& x) { return pow(x[0], 2.5); }));
  add_row(variant("pow", "integer exponent, negative base", {floating(m)}, [](const V& x) { return pow(x[0], 3.0); }));
  add_row(row("maximum", {floating(m), floating({4})}, [](const V& x) { return maximum(x[0], x[1]); }) |
          integers_too);
  add_row(row("minimum", {floating(m), floating(m)}, [](const V& x) { return minimum(x[0], x[1]); }) | integers_too);
  add_row(row("add_scalar", {floating(m)}, [](const V& x) { return add_scalar(x[0], 1.5); }) | integers_too);
  add_row(row("mul_scalar", {floating(m)}, [](const V& x) { return mul_scalar(x[0], -0.75); }) | integers_too);
}

// --- unary math and activations ---
void unary_rows(const AddRow& add_row) {
  add_row(row("neg", {floating(m)}, [](const V& x) { return neg(x[0]); }) | integers_too);
  add_row(row("exp", {floating(m)}, [](const V& x) { return exp(x[0]); }));
  add_row(row("log", {floating(m, 0.5, 3.0)}, [](const V& x) { return log(x[0]); }));
  add_row(row("sqrt", {floating(m, 0.5, 3.0)}, [](const V& x) { return sqrt(x[0]); }));
  add_row(row("rsqrt", {floating(m, 0.5, 3.0)}, [](const V& x) { return rsqrt(x[0]); }));
  add_row(row("abs", {floating(m)}, [](const V& x) { return abs(x[0]); }));
  add_row(row("sign", {floating(m)}, [](const V& x) { return sign(x[0]); }) | no_gradient | integers_too);
  add_row(row("clamp", {floating({8})}, [](const V& x) { return clamp(x[0], -1.0, 1.0); }) | integers_too);
  add_row(variant("clamp", "min only", {floating({8})}, [](const V& x) { return clamp(x[0], -0.5, std::nullopt); }) |
          integers_too);
  add_row(row("clamp_min", {floating({8})}, [](const V& x) { return clamp_min(x[0], 0.25); }) | integers_too);
  add_row(row("clamp_max", {floating({8})}, [](const V& x) { return clamp_max(x[0], -0.25); }) | integers_too);
  add_row(variant("clamp", "tensor bounds", {floating(m), floating({4}, -2.0, -0.5), floating({3, 1}, 0.5, 2.0)},
                  [](const V& x) { return clamp(x[0], x[1], x[2]); }) |
          integers_too);
  add_row(variant("clamp", "tensor min", {floating(m), floating({4})},
                  [](const V& x) { return clamp(x[0], x[1], Tensor()); }) |
          integers_too);
  add_row(variant("clamp", "tensor max, 0-d", {floating({2, 3}), floating({})},
                  [](const V& x) { return clamp(x[0], Tensor(), x[1]); }) |
          integers_too);
  add_row(with_reference(row("relu", {floating({8})}, [](const V& x) { return relu(x[0]); }),
                         [](const V& x) { return maximum(x[0], zeros_like(x[0])); }));
  add_row(row("leaky_relu", {floating({8})}, [](const V& x) { return leaky_relu(x[0], 0.2); }));
  add_row(with_reference(row("sigmoid", {floating(m)}, [](const V& x) { return sigmoid(x[0]); }),
                         [](const V& x) { return 1.0 / (1.0 + exp(-x[0])); }));
  add_row(with_reference(row("tanh", {floating(m)}, [](const V& x) { return tanh(x[0]); }),
                         [](const V& x) { return 1.0 - 2.0 / (exp(2.0 * x[0]) + 1.0); }));
  add_row(row("gelu", {floating(m)}, [](const V& x) { return gelu(x[0]); }));
  add_row(variant("gelu", "tanh", {floating(m)}, [](const V& x) { return gelu(x[0], GeluApproximate::Tanh); }));
  add_row(with_reference(row("silu", {floating(m)}, [](const V& x) { return silu(x[0]); }),
                         [](const V& x) { return x[0] * sigmoid(x[0]); }));
  add_row(row("where", {mask(m), floating(m), floating({4})}, [](const V& x) { return where(x[0], x[1], x[2]); }) |
          integers_too);
  add_row(row("masked_fill", {floating(m), mask({4})}, [](const V& x) { return masked_fill(x[0], x[1], -3.0); }) |
          integers_too);
}

// --- comparisons (uint8, no gradient) ---
void comparison_rows(const AddRow& add_row) {
  for (const auto& [name, cmp] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"eq", &eq}, {"ne", &ne}, {"lt", &lt}, {"le", &le}, {"gt", &gt}, {"ge", &ge}}) {
    // b equals a where the mask is set, so that every comparison has both answers
    add_row(row(name, {floating(m), floating(m), mask(m)},
                [compare = cmp](const V& x) { return compare(x[0], where(x[2], x[0], x[1])); }) |
            no_gradient | integers_too);
  }
}

// --- reductions ---
void reduction_rows(const AddRow& add_row) {
  add_row(row("sum", {floating(m)}, [](const V& x) { return sum(x[0]); }) | integers_too);
  add_row(variant("sum", "dims, keepdim", {floating({2, 3, 4})}, [](const V& x) { return sum(x[0], {0, 2}, true); }) |
          integers_too);
  add_row(variant("sum", "dims", {floating({2, 3, 4})}, [](const V& x) { return sum(x[0], {0, 2}); }) | integers_too);
  add_row(row("mean", {floating(m)}, [](const V& x) { return mean(x[0]); }));
  add_row(variant("mean", "dims", {floating({2, 3, 4})}, [](const V& x) { return mean(x[0], {1}); }));
  add_row(row("max", {floating(m)}, [](const V& x) { return max(x[0]); }) | integers_too);
  add_row(variant("max", "dims", {floating(m)}, [](const V& x) { return max(x[0], {1}); }) | integers_too);
  add_row(row("min", {floating(m)}, [](const V& x) { return min(x[0]); }) | integers_too);
  add_row(variant("min", "dims", {floating(m)}, [](const V& x) { return min(x[0], {0}, true); }) | integers_too);
  add_row(row("argmax", {floating(m)}, [](const V& x) { return argmax(x[0], 1); }) | no_gradient | integers_too);
  add_row(with_reference(row("var", {floating({4, 5})}, [](const V& x) { return var(x[0], {1}); }), [](const V& x) {
    const Tensor d = x[0] - mean(x[0], {1}, true);
    return sum(d * d, {1}) / 4.0;
  }));
  add_row(variant("var", "two dims", {floating({3, 4, 5})}, [](const V& x) { return var(x[0], {0, 2}); }));
  add_row(variant("var", "last dim, no correction, keepdim", {floating({3, 4})},
                  [](const V& x) { return var(x[0], {-1}, 0, true); }));
  add_row(row("stddev", {floating({4, 5})}, [](const V& x) { return stddev(x[0], {0}, 0, true); }));
  add_row(variant("stddev", "all dims", {floating({2, 3})}, [](const V& x) { return stddev(x[0], {}, 0); }));
  add_row(with_reference(row("softmax", {floating(m)}, [](const V& x) { return softmax(x[0], 1); }), [](const V& x) {
    const Tensor e = exp(x[0]);
    return e / sum(e, {1}, true);
  }));
  add_row(variant("softmax", "dim 0", {floating({3, 5})}, [](const V& x) { return softmax(x[0], 0); }));
  add_row(with_reference(row("log_softmax", {floating(m)}, [](const V& x) { return log_softmax(x[0], 0); }),
                         [](const V& x) { return x[0] - log(sum(exp(x[0]), {0}, true)); }));
  add_row(variant("log_softmax", "last dim", {floating({2, 3, 4})}, [](const V& x) { return log_softmax(x[0], -1); }));
  add_row(variant("log_softmax", "middle dim", {floating({2, 3, 4})},
                  [](const V& x) { return log_softmax(x[0], 1); }));
  add_row(with_reference(row("vector_norm", {floating({3, 5})}, [](const V& x) { return vector_norm(x[0], 2.0, {1}); }),
                         [](const V& x) { return sqrt(sum(x[0] * x[0], {1})); }));
  add_row(variant("vector_norm", "ord 1, all dims", {floating({3, 5})}, [](const V& x) { return vector_norm(x[0], 1.0); }));
  add_row(variant("vector_norm", "ord inf, keepdim", {floating({3, 5})},
                  [](const V& x) { return vector_norm(x[0], INFINITY, {0}, true); }));
  add_row(with_reference(variant("vector_norm", "ord 3", {floating({2, 3, 4})},
                                 [](const V& x) { return vector_norm(x[0], 3.0, {0, 2}); }),
                         [](const V& x) { return pow(sum(pow(abs(x[0]), 3.0), {0, 2}), 1.0 / 3.0); }));
  add_row(with_reference(row("normalize", {floating({3, 5})}, [](const V& x) { return normalize(x[0], 2.0, 1); }),
                         [](const V& x) { return x[0] / sqrt(sum(x[0] * x[0], {1}, true)); }));
  add_row(with_reference(row("cosine_similarity", {floating({3, 5}), floating({5})},
                             [](const V& x) { return cosine_similarity(x[0], x[1], 1); }),
                         [](const V& x) {
                           const Tensor dot = sum(x[0] * x[1], {1});
                           return dot / (sqrt(sum(x[0] * x[0], {1})) * sqrt(sum(x[1] * x[1])));
                         }));
  add_row(row("sum_to", {floating({2, 3, 4})}, [](const V& x) { return sum_to(x[0], {3, 1}); }) | integers_too);
  add_row(row("cumsum", {floating({3, 5})}, [](const V& x) { return cumsum(x[0], 1); }) | integers_too);
  add_row(row("sort", {floating({3, 5})}, [](const V& x) { return sort(x[0], 1).values; }) | integers_too);
  add_row(variant("sort", "descending indices", {floating({3, 5})},
                  [](const V& x) { return sort(x[0], 0, true).indices; }) |
          no_gradient | integers_too);
  add_row(row("argsort", {floating({3, 5})}, [](const V& x) { return argsort(x[0], 1); }) | no_gradient |
          integers_too);
  add_row(row("topk", {floating({3, 6})}, [](const V& x) { return topk(x[0], 2, 1).values; }) | integers_too);
}

// --- products ---
void product_rows(const AddRow& add_row) {
  add_row(row("matmul", {floating({2, 3, 4}), floating({4, 5})}, [](const V& x) { return matmul(x[0], x[1]); }) |
          accumulates);
  add_row(variant("matmul", "transposed operand", {floating({4, 3}), floating({4, 2})},
                  [](const V& x) { return matmul(x[0].t(), x[1]); }) |
          accumulates);
  add_row(variant("matmul", "broadcast batch", {floating({2, 1, 3, 4}), floating({3, 4, 2})},
                  [](const V& x) { return matmul(x[0], x[1]); }) |
          accumulates);
  add_row(variant("matmul", "1-D @ 2-D", {floating({4}), floating({4, 3})},
                  [](const V& x) { return matmul(x[0], x[1]); }) |
          accumulates);
  add_row(variant("matmul", "2-D @ 1-D", {floating({2, 4}), floating({4})},
                  [](const V& x) { return matmul(x[0], x[1]); }) |
          accumulates);
  add_row(variant("matmul", "1-D @ 1-D", {floating({4}), floating({4})},
                  [](const V& x) { return matmul(x[0], x[1]); }) |
          accumulates);
  add_row(row("linear", {floating({2, 3, 4}), floating({5, 4}), floating({5})},
              [](const V& x) { return linear(x[0], x[1], x[2]); }) |
          accumulates);
  add_row(variant("linear", "1-D input", {floating({4}), floating({3, 4}), floating({3})},
                  [](const V& x) { return linear(x[0], x[1], x[2]); }) |
          accumulates);
  add_row(variant("linear", "no bias", {floating({2, 3, 4}), floating({5, 4})},
                  [](const V& x) { return linear(x[0], x[1], Tensor()); }) |
          accumulates);
  add_row(row("einsum", {floating({2, 3, 4}), floating({2, 4, 5})},
              [](const V& x) { return einsum("bij,bjk->bik", {x[0], x[1]}); }) |
          accumulates);
  add_row(variant("einsum", "three operands", {floating({2, 3}), floating({2, 3, 4}), floating({2, 4})},
                  [](const V& x) { return einsum("bn,anm,bm->ba", {x[0], x[1], x[2]}); }) |
          accumulates);
  add_row(variant("einsum", "repeated subscript", {floating({3, 3, 2}), floating({2, 4})},
                  [](const V& x) { return einsum("iij,jk->ik", {x[0], x[1]}); }) |
          accumulates);
  add_row(variant("einsum", "size-1 dim broadcast", {floating({3, 4}), floating({1, 4})},
                  [](const V& x) { return einsum("ij,ij->i", {x[0], x[1]}); }) |
          accumulates);
  add_row(variant("einsum", "diagonal", {floating({2, 3, 3})},
                  [](const V& x) { return einsum("...ii->...i", {x[0]}); }));
  add_row(variant("einsum", "outer", {floating({3}), floating({4})},
                  [](const V& x) { return einsum("i,j->ij", {x[0], x[1]}); }));
}

// --- losses (targets are constants) ---
void loss_rows(const AddRow& add_row) {
  add_row(with_reference(row("cross_entropy", {floating({4, 5}), index({4}, 5)},
                             [](const V& x) { return cross_entropy(x[0], x[1], Reduction::Mean, -100, 0.1); }),
                         [](const V& x) {  // smoothed targets: 0.9 on the class, 0.1 spread over all 5
                           const Tensor logp = log_softmax(x[0], 1);
                           const Tensor picked = gather(logp, 1, x[1].reshape({4, 1}));
                           return -(mean(picked) * 0.9 + mean(logp) * 0.1);
                         }));
  add_row(row("nll_loss", {floating({4, 5}, -3.0, -0.1), index({4}, 5), constant({5}, 0.5, 2.0)},
              [](const V& x) { return nll_loss(x[0], x[1], Reduction::Mean, -100, x[2]); }));
  add_row(with_reference(row("mse_loss", {floating(m), constant(m)}, [](const V& x) { return mse_loss(x[0], x[1]); }),
                         [](const V& x) { return mean((x[0] - x[1]) * (x[0] - x[1])); }));
  add_row(row("l1_loss", {floating(m), constant(m)}, [](const V& x) { return l1_loss(x[0], x[1], Reduction::Sum); }));
  add_row(row("smooth_l1_loss", {floating(m), constant(m)},
              [](const V& x) { return smooth_l1_loss(x[0], x[1], Reduction::None, 0.5); }));
  add_row(row("huber_loss", {floating(m), constant(m)},
              [](const V& x) { return huber_loss(x[0], x[1], Reduction::Mean, 0.7); }));
  add_row(row("binary_cross_entropy", {floating(m, 0.05, 0.95), constant(m, 0.0, 1.0)},
              [](const V& x) { return binary_cross_entropy(x[0], x[1]); }));
  add_row(with_reference(
      row("binary_cross_entropy_with_logits", {floating(m), constant(m, 0.0, 1.0), constant({4}, 0.5, 2.0)},
          [](const V& x) { return binary_cross_entropy_with_logits(x[0], x[1], Reduction::Mean, Tensor(), x[2]); }),
      [](const V& x) {  // -(pos_weight t log s + (1 - t) log(1 - s))
        const Tensor s = sigmoid(x[0]);
        return -mean(x[2] * x[1] * log(s) + (1.0 - x[1]) * log(1.0 - s));
      }));
}

// --- indexing, joining, views ---
void indexing_rows(const AddRow& add_row) {
  add_row(row("index_select", {floating({4, 3}), index({5}, 4)}, [](const V& x) { return index_select(x[0], 0, x[1]); }) |
          integers_too);
  add_row(row("gather", {floating({3, 4}), index({3, 2}, 4)}, [](const V& x) { return gather(x[0], 1, x[1]); }) |
          integers_too);
  add_row(row("cat", {floating({2, 3}), floating({4, 3})}, [](const V& x) { return cat({x[0], x[1]}, 0); }) |
          integers_too);
  add_row(row("stack", {floating(m), floating(m)}, [](const V& x) { return stack({x[0], x[1]}, 1); }) | integers_too);
  add_row(row("chunk", {floating({3, 5})}, [](const V& x) {
            const std::vector<Tensor> parts = chunk(x[0], 2, 1);  // widths 3 and 2
            return cat({piece(parts, 1) * 2.0, piece(parts, 0)}, 1);
          }) | integers_too);
  add_row(row("split", {floating({5, 2})}, [](const V& x) {
            const std::vector<Tensor> parts = split(x[0], Shape{1, 4}, 0);
            return cat({piece(parts, 1), piece(parts, 0) * 3.0}, 0);
          }) | integers_too);
  add_row(variant("split", "an unused piece", {floating({5, 3})}, [](const V& x) {
            const std::vector<Tensor> parts = split(x[0], Shape{2, 1, 2}, 0);
            return sum(piece(parts, 0)) * sum(piece(parts, 2));  // the middle piece gets no gradient
          }) | integers_too);
  add_row(row("tril", {floating({4, 4})}, [](const V& x) { return tril(x[0], -1); }) | integers_too);
  add_row(row("triu", {floating({3, 5})}, [](const V& x) { return triu(x[0], 1); }) | integers_too);
  add_row(row("pad", {floating({2, 3, 4})}, [](const V& x) { return pad(x[0], {1, 2}, PadMode::Constant, 0.5); }) |
          integers_too);
  add_row(variant("pad", "two dims, a crop", {floating({2, 3, 4})},
                  [](const V& x) { return pad(x[0], {1, 2, -1, 1}, PadMode::Constant, 0.5); }) |
          integers_too);
  add_row(variant("pad", "reflect", {floating({2, 3, 4})}, [](const V& x) { return pad(x[0], {2, 1}, PadMode::Reflect); }) |
          integers_too);
  add_row(variant("pad", "reflect, two dims", {floating({2, 3, 4})},
                  [](const V& x) { return pad(x[0], {2, 3, 1, 1}, PadMode::Reflect); }) |
          integers_too);
  add_row(variant("pad", "replicate", {floating({2, 3, 4})},
                  [](const V& x) { return pad(x[0], {3, 0, 0, 2}, PadMode::Replicate); }) |
          integers_too);
  add_row(variant("pad", "circular, a crop", {floating({2, 3, 4})},
                  [](const V& x) { return pad(x[0], {4, 2, 1, -1}, PadMode::Circular); }) |
          integers_too);
}

// --- convolution, pooling, normalisation, dropout ---
void conv_pool_norm_rows(const AddRow& add_row) {
  add_row(row("conv2d", {floating({2, 3, 6, 5}), floating({4, 3, 3, 3}), floating({4})},
              [](const V& x) { return conv2d(x[0], x[1], x[2], {2, 1}, {1, 1}); }) |
          accumulates);
  add_row(row("max_pool2d", {floating({2, 2, 6, 5})}, [](const V& x) { return max_pool2d(x[0], {2, 2}, {2, 2}, {1, 0}); }));
  add_row(row("avg_pool2d", {floating({2, 2, 6, 5})},
              [](const V& x) { return avg_pool2d(x[0], {3, 2}, {2, 1}, {1, 1}, false); }));
  add_row(row("adaptive_avg_pool2d", {floating({2, 2, 6, 5})}, [](const V& x) { return adaptive_avg_pool2d(x[0], {3, 2}); }));
  add_row(row("batch_norm", {floating({4, 3, 2, 2}), floating({3}, 0.5, 1.5), floating({3})}, [](const V& x) {
            const TensorOptions stats = TensorOptions(x[0].dtype()).with_device(x[0].device());
            const Tensor running_mean = zeros({3}, stats), running_var = ones({3}, stats);
            return batch_norm(x[0], running_mean, running_var, x[1], x[2], true, 0.1, 1e-5, false);
          }));
  add_row(with_reference(row("layer_norm", {floating({2, 3, 4}), floating({4}, 0.5, 1.5), floating({4})},
                             [](const V& x) { return layer_norm(x[0], {4}, x[1], x[2]); }),
                         [](const V& x) {
                           const Tensor d = x[0] - mean(x[0], {2}, true);
                           return d * rsqrt(mean(d * d, {2}, true) + 1e-5) * x[1] + x[2];
                         }));
  add_row(variant("layer_norm", "two dims", {floating({2, 3, 4}), floating({3, 4}, 0.5, 1.5), floating({3, 4})},
                  [](const V& x) { return layer_norm(x[0], {3, 4}, x[1], x[2]); }));
  add_row(variant("layer_norm", "no affine, eps 1e-3", {floating({4, 5})},
                  [](const V& x) { return layer_norm(x[0], {5}, Tensor(), Tensor(), 1e-3); }));
  add_row(variant("layer_norm", "weight only", {floating({3, 5}), floating({5}, 0.5, 1.5)},
                  [](const V& x) { return layer_norm(x[0], {5}, x[1]); }));
  // A weight that wants no gradient: the input and the bias still get theirs.
  add_row(variant("layer_norm", "constant weight", {floating({2, 5}), constant({5}, 0.5, 1.5), floating({5})},
                  [](const V& x) { return layer_norm(x[0], {5}, x[1], x[2]); }));
  add_row(row("dropout", {floating({4, 6})}, [](const V& x) { return seeded_dropout(x[0]); }));
}

// --- transformer building blocks ---
void transformer_rows(const AddRow& add_row) {
  add_row(row("embedding", {floating({6, 3}), index({2, 4}, 6)}, [](const V& x) { return embedding(x[0], x[1]); }));
  add_row(row("causal_mask", {}, [](const V&) { return causal_mask(4); }) | no_gradient);
  add_row(row("scaled_dot_product_attention", {floating({2, 3, 4}), floating({2, 5, 4}), floating({2, 5, 3})},
              [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }) |
          accumulates);
  add_row(variant("scaled_dot_product_attention", "causal", {floating({2, 4, 3}), floating({2, 4, 3}), floating({2, 4, 3})},
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true); }) |
          accumulates);
  add_row(variant("scaled_dot_product_attention", "boolean mask", {floating({2, 4, 3}), floating({2, 4, 3}),
                                                                    floating({2, 4, 3}), mask({4, 4})},
                  [](const V& x) {
                    // every query keeps its own key, so no row of the mask is empty
                    const Tensor keep = maximum(x[3], triu(causal_mask(4, x[3].device())));
                    return scaled_dot_product_attention(x[0], x[1], x[2], keep);
                  }) |
          accumulates);
  add_row(variant("scaled_dot_product_attention", "causal, more queries than keys, scale",
                  {floating({2, 1, 4, 2}), floating({2, 1, 3, 2}), floating({2, 1, 3, 3})},
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true, 0.6); }) |
          accumulates);
  add_row(variant("scaled_dot_product_attention", "unbatched, a mask narrowed to causal, scale",
                  {floating({3, 2}), floating({4, 2}), floating({4, 3}), mask({4})},
                  [](const V& x) {
                    const Tensor keep = causal_attn_mask(x[3], 3, 4);
                    return scaled_dot_product_attention(x[0], x[1], x[2], keep, 0.0, false, 0.7);
                  }) |
          accumulates);
  add_row(variant("scaled_dot_product_attention", "float mask",
                  {floating({3, 2}), floating({4, 2}), floating({4, 3}), constant({3, 4})},
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); }) |
          accumulates);
  add_row(variant("scaled_dot_product_attention", "a query that attends to nothing",
                  {floating({3, 2}), floating({4, 2}), floating({4, 3})}, [](const V& x) {
                    // query 1 may attend to no key: zeros, and no gradient (Note [Rows that attend to nothing])
                    const Tensor keep = from_vector({1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0}, {3, 4}).to(kUInt8);
                    return scaled_dot_product_attention(x[0], x[1], x[2], keep.to(x[0].device()));
                  }) |
          accumulates);
  // The rows above run on the fused kernels where the device has them (core/attention_backend.h);
  // these run the math path, the reference, on every device.
  add_row(variant("scaled_dot_product_attention", "math path", {floating({2, 3, 4}), floating({2, 5, 4}),
                                                                 floating({2, 5, 3})},
                  [](const V& x) {
                    AttentionBackendGuard math(AttentionBackend::Math);
                    return scaled_dot_product_attention(x[0], x[1], x[2]);
                  }) |
          accumulates);
  add_row(variant("scaled_dot_product_attention", "math path, causal, more queries than keys, scale",
                  {floating({2, 1, 4, 2}), floating({2, 1, 3, 2}), floating({2, 1, 3, 3})},
                  [](const V& x) {
                    AttentionBackendGuard math(AttentionBackend::Math);
                    return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true, 0.6);
                  }) |
          accumulates);
  // A float mask that wants a gradient goes to the math path on every device (Note [Fused attention]).
  add_row(variant("scaled_dot_product_attention", "float mask with a gradient",
                  {floating({3, 2}), floating({4, 2}), floating({4, 3}), floating({3, 4})},
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); }) |
          accumulates);
}

// --- Tensor methods: views, copies and casts (Note [The op registry] in core/op_registry.h) ---
void tensor_method_rows(const AddRow& add_row) {
  add_row(row("contiguous", {floating(m)}, [](const V& x) { return x[0].t().contiguous(); }) | integers_too);
  add_row(row("clone", {floating(m)}, [](const V& x) { return x[0].clone(); }) | integers_too);
  add_row(row("to", {floating(m)}, [](const V& x) { return x[0].to(kFloat64); }) | integers_too);
  add_row(row("view", {floating(m)}, [](const V& x) { return x[0].view({4, 3}); }) | integers_too);
  add_row(row("reshape", {floating(m)}, [](const V& x) { return x[0].reshape({2, 6}); }) | integers_too);
  add_row(variant("reshape", "of a transposed view: a copy", {floating(m)},
                  [](const V& x) { return x[0].t().reshape({12}); }) |
          integers_too);
  add_row(row("transpose", {floating({2, 3, 4})}, [](const V& x) { return x[0].transpose(0, 2); }) | integers_too);
  add_row(row("t", {floating(m)}, [](const V& x) { return x[0].t(); }) | integers_too);
  add_row(row("permute", {floating({2, 3, 4})}, [](const V& x) { return x[0].permute({2, 0, 1}); }) | integers_too);
  add_row(row("narrow", {floating(m)}, [](const V& x) { return x[0].narrow(1, 1, 2); }) | integers_too);
  add_row(row("slice", {floating({5, 4})}, [](const V& x) { return x[0].slice(0, 1, 5, 2); }) | integers_too);
  add_row(row("select", {floating(m)}, [](const V& x) { return x[0].select(1, 2); }) | integers_too);
  add_row(row("expand", {floating({3, 1})}, [](const V& x) { return x[0].expand({2, 3, 4}); }) | integers_too);
  add_row(row("squeeze", {floating({3, 1, 4})}, [](const V& x) { return x[0].squeeze(); }) | integers_too);
  add_row(variant("squeeze", "one dim", {floating({3, 1, 4, 1})}, [](const V& x) { return x[0].squeeze(1); }) |
          integers_too);
  add_row(row("unsqueeze", {floating(m)}, [](const V& x) { return x[0].unsqueeze(1); }) | integers_too);
  add_row(row("flatten", {floating({2, 3, 4})}, [](const V& x) { return x[0].flatten(1); }) | integers_too);
}

// The families in the order they are written above (make_autocast_fixtures.py reads the rows in
// that order) and were added (op_table_seed numbers the rows in this order).
std::vector<OpRow> make_table() {
  std::vector<OpRow> t;
  const AddRow add_row = [&t](OpRow r) { t.push_back(std::move(r)); };
  for (auto* family : {arithmetic_rows, unary_rows, comparison_rows, reduction_rows, product_rows, loss_rows,
                       indexing_rows, conv_pool_norm_rows, transformer_rows, tensor_method_rows})
    family(add_row);
  return t;
}

}  // namespace

// --- the checks' shared steps ---

namespace {

struct Result {
  std::vector<double> out;
  std::vector<std::vector<double>> grads;  // per input; empty where none
};

// The row's forward, and the gradients of sum(out * upstream) with respect to each differentiable
// input, upstream being float64 normals of the output's shape drawn from `upstream_seed` and
// rounded through `upstream_dtype`: every run of a comparison draws the same one.
Result run(const OpRow& r, const std::vector<Tensor>& inputs, uint64_t upstream_seed, DType upstream_dtype) {
  const Tensor out = r.fn(inputs);
  Result result{values(out.cpu()), {}};
  if (!r.differentiable) return result;
  manual_seed(upstream_seed);
  const Tensor upstream = randn(out.shape(), kFloat64).to(upstream_dtype);
  sum(out * upstream.to(out.dtype()).to(out.device())).backward();
  for (const Tensor& in : inputs)
    result.grads.push_back(in.requires_grad() && in.grad().defined() ? values(in.grad().cpu()) : std::vector<double>{});
  return result;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << ", element " << i;
      continue;
    }
    ASSERT_LE(std::abs(got[i] - want[i]), tol * (1 + std::abs(want[i])))
        << what << ", element " << i << ": " << got[i] << " vs " << want[i];
  }
}

void expect_same_result(const Result& got, const Result& want, double tol) {
  expect_close(got.out, want.out, tol, "output");
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i)
    expect_close(got.grads[i], want.grads[i], tol, "gradient of input " + std::to_string(i));
}

}  // namespace

std::string op_label(const OpRow& r) { return r.variant.empty() ? r.op : r.op + " (" + r.variant + ")"; }

uint64_t op_table_seed(size_t row) { return 1000 + row; }

double column_tolerance(const OpRow& r, DType dtype) {
  return is_sixteen_bit(dtype) ? r.sixteen_bit_steps * finfo(dtype).eps : r.float32_tolerance;
}

// The row's inputs in float64, from a seed of their own per row: the reference values every
// column rounds from.
std::vector<Tensor> make_op_inputs(const OpRow& r, uint64_t seed) {
  manual_seed(seed);
  std::vector<Tensor> inputs;
  for (const OpInput& in : r.inputs) {
    switch (in.kind) {
      case OpInput::Kind::Floating: inputs.push_back(rand(in.shape, kFloat64) * (in.hi - in.lo) + in.lo); break;
      case OpInput::Kind::Index: inputs.push_back(randint(0, in.high, in.shape)); break;
      case OpInput::Kind::Mask: inputs.push_back(rand(in.shape) < 0.5); break;
    }
  }
  return inputs;
}

// The inputs in `dtype` on `device`: floating ones converted (differentiable ones made leaves
// that require grad), the others as they are.
std::vector<Tensor> op_inputs_as(const OpRow& r, const std::vector<Tensor>& base, DType dtype, Device device) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < base.size(); ++i) {
    Tensor t = base[i].to(device);
    if (r.inputs[i].kind == OpInput::Kind::Floating) {
      t = t.to(dtype).detach();
      if (r.differentiable && !r.inputs[i].constant) t.requires_grad_();
    }
    out.push_back(t);
  }
  return out;
}

// One column of the table against the float64 column: same values, same upstream gradient.
// The upstream gradient's seed, apart from every row's input seed.
uint64_t upstream_seed(uint64_t input_seed) { return input_seed + (uint64_t{1} << 32); }

// The float64 column computes from the column's own values: the floating inputs and the upstream
// gradient rounded through `dtype`, so that the comparison measures the op's error in `dtype`
// and not the rounding of its inputs.
void compare_with_float64(const OpRow& r, uint64_t seed, DType dtype, Device device, double tol) {
  std::vector<Tensor> base = make_op_inputs(r, seed);
  for (size_t i = 0; i < base.size(); ++i)
    if (r.inputs[i].kind == OpInput::Kind::Floating) base[i] = base[i].to(dtype).to(kFloat64);
  expect_same_result(run(r, op_inputs_as(r, base, dtype, device), upstream_seed(seed), dtype),
                     run(r, op_inputs_as(r, base, kFloat64, kCPU), upstream_seed(seed), dtype), tol);
}

void compare_with_reference(const OpRow& r, uint64_t seed, double tol) {
  const std::vector<Tensor> base = make_op_inputs(r, seed);
  OpRow composed = r;
  composed.fn = r.reference;
  expect_same_result(run(r, op_inputs_as(r, base, kFloat64, kCPU), upstream_seed(seed), kFloat64),
                     run(composed, op_inputs_as(r, base, kFloat64, kCPU), upstream_seed(seed), kFloat64), tol);
}

namespace {

// t's values in a tensor that is not contiguous: its last dim read with a stride of 2 from a
// buffer twice as wide. A leaf that requires grad where t does.
Tensor non_contiguous_copy(const Tensor& t) {
  if (t.dim() == 0) return t;
  Shape wide = t.shape();
  wide.back() *= 2;
  Tensor view = zeros(wide, TensorOptions(t.dtype()).with_device(t.device())).slice(-1, 0, wide.back(), 2);
  view.copy_(t.detach());
  view = view.detach();
  if (t.requires_grad()) view.requires_grad_();
  return view;
}

}  // namespace

void compare_non_contiguous(const OpRow& r, uint64_t seed, Device device) {
  const std::vector<Tensor> base = make_op_inputs(r, seed);
  std::vector<Tensor> strided;
  for (const Tensor& t : op_inputs_as(r, base, kFloat64, device)) strided.push_back(non_contiguous_copy(t));
  expect_same_result(run(r, strided, upstream_seed(seed), kFloat64),
                     run(r, op_inputs_as(r, base, kFloat64, device), upstream_seed(seed), kFloat64), 1e-12);
}

bool check_zero_size(const OpRow& r, uint64_t seed, Device device) {
  std::vector<Tensor> base = make_op_inputs(r, seed);
  if (base.empty() || base[0].dim() == 0) return false;
  const int64_t batch = base[0].size(0);
  for (Tensor& t : base)
    if (t.dim() > 0 && t.size(0) == batch) t = t.narrow(0, 0, 0).contiguous();
  const std::vector<Tensor> inputs = op_inputs_as(r, base, kFloat64, device);
  try {
    const Tensor out = r.fn(inputs);
    if (!r.differentiable || !out.requires_grad()) return true;
    sum(out).backward();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].requires_grad() || !inputs[i].grad().defined()) continue;
      EXPECT_EQ(inputs[i].grad().shape(), inputs[i].shape()) << "the gradient of input " << i;
    }
    return true;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_TRUE(message.find('[') != std::string::npos && message.find("] ") != std::string::npos)
        << "an error that names no op: " << message;
    return false;
  }
}

const std::vector<OpRow>& op_table() {
  static const std::vector<OpRow> table = make_table();
  return table;
}

namespace {

// label -> the output dtype in each of the fixture's three columns.
std::map<std::string, std::array<std::string, 3>> autocast_fixture(const std::string& file) {
  const std::string path = fixtures_dir() + "/" + file;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::map<std::string, std::array<std::string, 3>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string label;
    std::array<std::string, 3> dtypes;
    std::getline(fields, label, '\t');
    for (auto& d : dtypes) std::getline(fields, d, '\t');
    out[label] = dtypes;
  }
  return out;
}

std::string autocast_output_dtype(const OpRow& r, const std::vector<Tensor>& base, AutocastColumn column,
                                  Device device) {
  const std::vector<Tensor> args = op_inputs_as(r, base, column.inputs, device);
  Autocast autocast(device.type, column.region);
  try {
    return dtype_name(r.fn(args).dtype());
  } catch (const Error&) {
    return "error";
  }
}

}  // namespace

void expect_autocast_dtypes(const std::string& file, Device device, const std::array<AutocastColumn, 3>& columns) {
  const auto expected = autocast_fixture(file);
  const auto& table = op_table();
  ASSERT_EQ(expected.size(), table.size()) << "the fixture has a row per op-table row";
  for (size_t i = 0; i < table.size(); ++i) {
    const OpRow& r = table[i];
    const std::string label = op_label(r);
    SCOPED_TRACE(label);
    ASSERT_TRUE(expected.count(label)) << "no PyTorch dtype for this row: regenerate " << file;
    const std::vector<Tensor> base = make_op_inputs(r, op_table_seed(i));
    for (size_t k = 0; k < columns.size(); ++k)
      EXPECT_EQ(autocast_output_dtype(r, base, columns[k], device), expected.at(label)[k])
          << columns[k].inputs << " inputs, " << columns[k].region << " autocast";
  }
}

const std::vector<OpExemption>& op_table_exemptions() {
  static const std::vector<OpExemption> exemptions = {
      {"fingerprint", "returns a uint64 checksum, not a tensor; tests/test_checkpoint.cpp and test_cuda.cpp pin it"},
      {"attention_weights", "the first half of scaled_dot_product_attention (its checks, cast and ops), whose rows "
                            "cover it; tests/test_attention.cpp checks its weights against PyTorch's through "
                            "nn::MultiheadAttention's need_weights"},
      {"causal_attn_mask", "tril and a where or a product, which have rows; tests/test_attention.cpp pins "
                           "its values"},
  };
  return exemptions;
}

}  // namespace ember::testutil
