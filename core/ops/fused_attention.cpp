// scaled_dot_product_attention on fused kernels: one op whose backward keeps O(L) numbers per
// query row instead of the [..., L, S] weights (Note [Fused attention]).
#include "core/ops/fused_attention.h"

#include <optional>
#include <tuple>

#include "core/attention_backend.h"
#include "core/autograd/function.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/kernels/fused_attention.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember::ops {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;
using kernels::AttentionMaskLayout;
using kernels::AttentionSpec;

// Note [Fused attention]
// The math path (core/ops/attention.cpp) stores the weights softmax(scale * q k^T + mask), a
// [..., L, S] tensor, for its backward: at context 4096 and 12 heads, 800 MB per sample and
// block. The fused op never makes them whole. Its forward takes a tile of query rows and walks
// the keys a tile at a time, keeping per row a running maximum m, a running sum l of exp(s - m)
// and a running numerator o = sum of exp(s - m) v (the online softmax). When a tile raises the
// maximum from m to m', everything kept so far is rescaled by exp(m - m'), which is what it would
// have been had m' been known from the start; after the last tile the output is o / l. So a
// tile of scores lives only while it is used, and the result is the softmax's up to rounding.
//
// The backward needs the weights again, and gets them without storing them: each row keeps one
// number, its log-sum-exp lse = m + log(l), and the weight of key j is exp(s_j - lse), with s_j
// recomputed from q and k in the same tiles. With D_i = sum_e dO_ie O_ie (the dot of a row of the
// output with its gradient, which equals sum_j P_ij dP_ij), the score gradient is
// dS = P * (dP - D), and dq, dk, dv are tile products of dS and dP's pieces (FlashAttention-2's
// backward: Dao, 2023). What the backward holds is O(L) per matrix: q, k, v, the output, lse.
// That is checkpointing in miniature: the op drops its largest intermediate and recomputes it
// from what it kept, for one more product q k^T per tile, inside one op.
//
// A row that may attend to no key (all masked) has l = 0: its output is 0, as on the math path
// (Note [Rows that attend to nothing] in core/ops/attention.cpp), and its lse is +inf, which
// makes every recomputed weight exp(s - inf) = 0 and so its gradients 0.
//
// Note [Dropout regenerated per tile]
// Dropout of the weights needs the same mask in the backward as in the forward. The math path
// stores it ([..., L, S] bytes). Here the mask is a function of where an element is: element
// (b, i, j) is kept when the Philox number with index (b L + i) S + j of the stream (seed, offset)
// is >= p (Note [Philox4x32-10]), so any tile regenerates its piece from the counter, in the
// forward, in the backward and in a checkpoint's recompute, which replays the generator's state.
// The op reserves batch L S numbers of the device's generator, as the math path's dropout draws,
// and indexes them as it does: for float64 the two paths drop the same elements (for other
// dtypes the math path compares a rounded uniform, and may differ in the rare element between).
//
// Where it applies: every dtype (16-bit ones computed in float32 by the kernel table, float64 in
// float64), masks of uint8 or of the query's dtype that broadcast over any leading dims (read
// through their broadcast strides, never copied to the scores' size), is_causal with L != S,
// scale and dropout. It gives no gradient to an additive mask: a mask that requires one goes to
// the math path (as PyTorch's fused kernels do), and so does a device without a fused kernel
// (and CUDA under Auto, for now: Note [Fused attention on CUDA] in cuda/fused_attention.cu).

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
// Its tiles of q, k, v and the gradients' sums live in shared memory (cuda/fused_attention.cu).
constexpr int64_t kMaxCudaHeadDim = 128;

// The mask broadcast to the scores' shape, described for the kernels: leading dims of size 1
// dropped and neighbours whose strides chain merged. nullopt when more than kMaxDims remain.
std::optional<AttentionMaskLayout> mask_layout(const Tensor& expanded, AttentionMaskLayout::Kind kind) {
  AttentionMaskLayout layout;
  layout.kind = kind;
  const int64_t n = expanded.dim();
  layout.row_stride = expanded.stride(n - 2);
  layout.col_stride = expanded.stride(n - 1);
  Shape sizes, strides;
  for (int64_t d = 0; d < n - 2; ++d) {
    const int64_t size = expanded.size(d), stride = expanded.stride(d);
    if (size == 1) continue;
    if (!sizes.empty() && strides.back() == stride * size) {
      sizes.back() *= size;
      strides.back() = stride;
    } else {
      sizes.push_back(size);
      strides.push_back(stride);
    }
  }
  if (static_cast<int64_t>(sizes.size()) > AttentionMaskLayout::kMaxDims) return std::nullopt;
  layout.dims = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    layout.sizes[d] = sizes[d];
    layout.strides[d] = strides[d];
  }
  return layout;
}

DType compute_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

// attn_mask broadcast to the scores' shape [..., L, S] (a view).
Tensor broadcast_mask(const Tensor& attn_mask, const Tensor& q, int64_t S) {
  Shape scores = q.shape();
  scores.back() = S;
  return attn_mask.expand(scores);
}

// The mask as the kernels read it: an additive mask in the dtype they compute in, broadcast.
Tensor kernel_mask(const Tensor& attn_mask, const Tensor& q, int64_t S) {
  const DType want = compute_dtype(q.dtype());
  const bool convert = attn_mask.dtype() != kUInt8 && attn_mask.dtype() != want;
  return broadcast_mask(convert ? attn_mask.to(want) : attn_mask, q, S);
}

struct FusedAttention : Function<FusedAttention> {
  static constexpr const char* name = "fused_attention";
  struct State {
    AttentionSpec spec;
    Shape q_shape, k_shape, v_shape;
    autograd::SavedRef q, k, v, out, lse;
    std::optional<autograd::SavedRef> mask;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                        double dropout_p, bool is_causal, double scale) {
    const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
    const Shape lead(q.shape().begin(), q.shape().end() - 2);
    const int64_t batch = numel_of(lead, kOp);
    AttentionSpec& spec = s.spec;
    spec = AttentionSpec{};
    spec.batch = batch;
    spec.L = L;
    spec.S = S;
    spec.head_dim = E;
    spec.value_dim = Ev;
    spec.scale = scale;
    spec.causal = is_causal;
    Tensor mask;
    if (attn_mask.defined()) {
      mask = kernel_mask(attn_mask, q, S);
      const auto kind = attn_mask.dtype() == kUInt8 ? AttentionMaskLayout::Kind::Allowed
                                                    : AttentionMaskLayout::Kind::Additive;
      spec.mask = *mask_layout(mask, kind);  // fused_attention_refusal checked that it fits
    }
    if (dropout_p > 0) {
      spec.dropout_p = dropout_p;
      std::tie(spec.seed, spec.offset) =
          default_generator(q.device()).reserve(static_cast<uint64_t>(checked_mul(batch * L, S, kOp, q.shape())));
    }
    const Tensor q3 = q.contiguous().view({batch, L, E}), k3 = k.contiguous().view({batch, S, E}),
                 v3 = v.contiguous().view({batch, S, Ev});
    const Tensor out = empty_on({batch, L, Ev}, q.dtype(), q.device());
    const Tensor lse = empty_on({batch, L}, compute_dtype(q.dtype()), q.device());
    if (batch * L > 0) kernels::fused_attention_forward[q.device()](q3, k3, v3, mask, spec, out, lse);
    s.q_shape = q.shape();
    s.k_shape = k.shape();
    s.v_shape = v.shape();
    s.q = c.save(q3);
    s.k = c.save(k3);
    s.v = c.save(v3);
    s.out = c.save(out);
    s.lse = c.save(lse);
    if (mask.defined()) s.mask = c.save(mask);
    Shape out_shape = lead;
    out_shape.push_back(L);
    out_shape.push_back(Ev);
    return out.view(out_shape);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const AttentionSpec& spec = s.spec;
    const Tensor q = c.get(s.q), k = c.get(s.k), v = c.get(s.v);
    const Tensor grad_q = empty_on(q.shape(), q.dtype(), q.device());
    const Tensor grad_k = empty_on(k.shape(), k.dtype(), k.device());
    const Tensor grad_v = empty_on(v.shape(), v.dtype(), v.device());
    if (spec.batch * (spec.L + spec.S) > 0) {
      const Tensor g3 = g.contiguous().view({spec.batch, spec.L, spec.value_dim});
      kernels::fused_attention_backward[q.device()](q, k, v, c.get(s.mask), spec, c.get(s.out), c.get(s.lse), g3,
                                                     grad_q, grad_k, grad_v);
    }
    return {grad_q.view(s.q_shape), grad_k.view(s.k_shape), grad_v.view(s.v_shape)};
  }
};

}  // namespace

std::string fused_attention_refusal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    AttentionBackend backend) {
  if (!has_fused_attention(q.device()))
    return detail::concat("no fused attention kernel for ", q.device(), " in this build");
  if (backend == AttentionBackend::Auto && !auto_attention_is_fused(q.device()))
    return detail::concat("Auto does not run the fused kernels on ", q.device(), " yet");
  if (q.device().is_cuda()) {  // Note [Fused attention on CUDA] in cuda/fused_attention.cu
    if (q.size(-1) > kMaxCudaHeadDim || v.size(-1) > kMaxCudaHeadDim)
      return detail::concat("the CUDA kernel takes head dims up to ", kMaxCudaHeadDim, ", got ", q.size(-1),
                            " and ", v.size(-1));
  }
  if (attn_mask.defined()) {
    if (attn_mask.requires_grad() && is_grad_enabled())
      return "the additive attn_mask requires a gradient, which the fused kernels do not compute";
    if (!mask_layout(broadcast_mask(attn_mask, q, k.size(-2)), AttentionMaskLayout::Kind::Allowed))
      return detail::concat("attn_mask ", shape_str(attn_mask.shape()), " has more than ",
                            AttentionMaskLayout::kMaxDims, " leading dims that do not merge");
  }
  return "";
}

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
                       bool is_causal, double scale) {
  return FusedAttention::apply(q, k, v, attn_mask, dropout_p, is_causal, scale);
}

}  // namespace ember::ops
