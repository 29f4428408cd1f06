// CPU kernels of fused attention (Note [Fused attention] in core/ops/fused_attention.cpp): the
// forward walks key tiles with an online softmax, the backward recomputes each tile's weights
// from the saved log-sum-exp. float and double compute in their own type; bfloat16 and float16
// in float32, a tile at a time (Note [Attention tiles on the CPU]).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/blas.h"
#include "core/cpu/lane_reductions.h"
#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/cpu/vmath.h"
#include "core/kernels/fused_attention.h"

namespace ember::cpu {
namespace {

using kernels::AttentionSpec;
using MaskKind = kernels::AttentionMaskLayout::Kind;

// Note [Attention tiles on the CPU]
// A forward task is kQueryTile query rows of one attention matrix; it walks the keys kKeyTile at
// a time. Per tile: one product q_tile k_tile^T into a [kQueryTile, kKeyTile] scratch of scores
// (64 KB in float32, in L2 next to the k and v tiles it reads), the row work on it in place, and
// one product of the weights with the v tile added into the output rows, which hold the running
// numerator. The products run on the CPU's gemm (OpenBLAS or oneDNN, Note [Two BLAS for one
// gemm]); called inside the task's OpenMP region they stay on its thread. A backward task is one
// whole matrix (query tiles outer, key tiles inner), so dq, dk and dv are each added up in one
// fixed order by one thread: the results are the same bits for any thread count. Its scratch is
// three tiles (the weights, the dropped weights, the gradient of the scores); nothing in either
// direction grows with L * S.
// bfloat16 and float16 operands are widened to float32 a tile at a time as the products need
// them (a key tile is widened again for each query tile: E / 128 of the tile's product work), and
// results are added up in float32 and rounded once: a forward task's output rows, a backward
// task's dq, dk and dv, which for 16-bit inputs are float32 buffers of the matrix's [L, E] and
// [S, E] size, O(L) as the rest.
constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyTile = 256;

struct NoMask {};

// The mask of one row of a tile: its first element and the step between keys. M is uint8_t (may
// attend), C (added) or NoMask.
template <class M>
struct MaskRow {
  const M* at = nullptr;
  int64_t step = 0;
};

// Note [Row loops take values] (core/cpu/softmax.cpp): the row loops below take pointers and
// numbers as arguments, so that GCC vectorises them.

// s[c] = scale * s[c] + mask, -inf where the mask or the causal pattern hides key c; the first
// `visible` of `cols` keys are visible before the mask.
template <class C, class M>
void scale_and_mask(C* s, int64_t visible, int64_t cols, C scale, MaskRow<M> mask) {
  constexpr C kMinusInf = -std::numeric_limits<C>::infinity();
  for (int64_t c = 0; c < visible; ++c) {
    const C x = s[c] * scale;
    if constexpr (std::is_same_v<M, uint8_t>) s[c] = mask.at[c * mask.step] != 0 ? x : kMinusInf;
    else if constexpr (std::is_same_v<M, C>) s[c] = x + mask.at[c * mask.step];
    else s[c] = x;
  }
  std::fill(s + visible, s + cols, kMinusInf);
}

// Folds a tile's row of masked scores s into the row's running maximum m, sum l and numerator o
// (Ev values): the online softmax. Leaves exp(s - m) in s, the weights before normalisation.
template <class C>
void online_softmax_row(C* s, int64_t cols, C& m, C& l, C* o, int64_t ev) {
  const C tile_max = reduce_row<MaxOp<C>>(cols, load_from(s));
  const C m_new = MaxOp<C>::step(m, tile_max);
  if (m_new == -std::numeric_limits<C>::infinity()) {  // nothing visible yet
    std::fill(s, s + cols, C(0));
    return;
  }
  for (int64_t c = 0; c < cols; ++c) s[c] = vmath::exp(s[c] - m_new);
  const C alpha = vmath::exp(m - m_new);  // 0 the first time (m = -inf)
  l = l * alpha + static_cast<C>(reduce_row<SumOp<C>>(cols, load_from(s)));
  m = m_new;
  if (alpha != C(1))
    for (int64_t e = 0; e < ev; ++e) o[e] *= alpha;
}

// p[c] = exp(s[c] - lse): the tile's weights again, from the row's log-sum-exp (0 where masked,
// and in a row that sees nothing, whose lse is +inf).
template <class C>
void weights_from_lse(C* p, int64_t cols, C lse) {
  for (int64_t c = 0; c < cols; ++c) p[c] = vmath::exp(p[c] - lse);
}

// Which of keys j0 .. j0 + cols - 1 of row (b, i) dropout keeps: spec.keeps, one Philox block
// per four elements rather than per element.
void dropout_keep_row(const AttentionSpec& spec, int64_t b, int64_t i, int64_t j0, int64_t cols, uint8_t* keep) {
  const auto first = static_cast<uint64_t>((b * spec.L + i) * spec.S + j0);
  for (int64_t c = 0; c < cols;) {
    const uint64_t index = first + static_cast<uint64_t>(c);
    const philox::Block block = philox::generate(spec.seed, spec.offset + index / 4);
    for (uint64_t w = index % 4; w < 4 && c < cols; ++w, ++c) keep[c] = philox::to_unit(block.v[w]) >= spec.dropout_p;
  }
}

template <class C>
void apply_dropout(const C* p, const uint8_t* keep, int64_t cols, C kept_scale, C* out) {
  for (int64_t c = 0; c < cols; ++c) out[c] = keep[c] != 0 ? p[c] * kept_scale : C(0);
}

// The gradient of a row of masked scores, scale folded in: ds = p * (dp' - D) * scale, where dp'
// is the gradient of the dropped weights passed back through dropout and D the row's dot of the
// output with its gradient. Written over dp.
template <class C>
void scores_grad_row(const C* p, C* dp, const uint8_t* keep, int64_t cols, C kept_scale, C d, C scale) {
  if (keep == nullptr) {
    for (int64_t c = 0; c < cols; ++c) dp[c] = p[c] * (dp[c] - d) * scale;
  } else {
    for (int64_t c = 0; c < cols; ++c) dp[c] = p[c] * ((keep[c] != 0 ? dp[c] * kept_scale : C(0)) - d) * scale;
  }
}

template <class C>
C dot_row(const C* a, const C* b, int64_t n) {
  return static_cast<C>(reduce_row<SumOp<C>>(n, [a, b](int64_t e) { return a[e] * b[e]; }));
}

// A run of n elements as the compute type C: the run itself when it is stored as C, else a copy
// widened into `scratch` (a 16-bit tile, converted as it is used: Note [Attention tiles on the CPU]).
template <class C, class T>
const C* widened(const T* p, int64_t n, std::vector<C>& scratch) {
  if constexpr (std::is_same_v<T, C>) {
    return p;
  } else {
    scratch.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) scratch[static_cast<size_t>(i)] = static_cast<C>(p[i]);
    return scratch.data();
  }
}

// Where a result of n elements stored as T is added up in C: in place when T is C, else in
// `scratch`, zeroed; finish() rounds it into place once.
template <class C, class T>
struct Accumulator {
  T* place;
  int64_t n;
  std::vector<C> scratch;
  C* data;
  Accumulator(T* place, int64_t n) : place(place), n(n) {
    if constexpr (std::is_same_v<T, C>) {
      data = place;
    } else {
      scratch.resize(static_cast<size_t>(n));
      data = scratch.data();
    }
    std::fill(data, data + n, C(0));
  }
  void finish() {
    if constexpr (!std::is_same_v<T, C>)
      for (int64_t i = 0; i < n; ++i) place[i] = static_cast<T>(data[i]);
  }
};

// One attention matrix's operands, from the kernel's tensors: stored as T, computed in C.
template <class T, class M>
struct Matrix {
  using C = math::Compute<T>;
  const AttentionSpec& spec;
  const T *q, *k, *v;
  const M* mask;  // element (0, 0) of this matrix's mask, or null
  int64_t b;

  Matrix(const AttentionSpec& spec, const Tensor& tq, const Tensor& tk, const Tensor& tv, const Tensor& tmask,
         int64_t b)
      : spec(spec),
        q(tq.data<T>() + b * spec.L * spec.head_dim),
        k(tk.data<T>() + b * spec.S * spec.head_dim),
        v(tv.data<T>() + b * spec.S * spec.value_dim),
        mask(nullptr),
        b(b) {
    if constexpr (!std::is_same_v<M, NoMask>) mask = tmask.data<M>() + spec.mask.base(b);
  }
  MaskRow<M> mask_row(int64_t i, int64_t j0) const {
    if constexpr (std::is_same_v<M, NoMask>) return {};
    else return {mask + i * spec.mask.row_stride + j0 * spec.mask.col_stride, spec.mask.col_stride};
  }
  // The keys a tile of query rows [i0, i0 + rows) reaches: all, or with the causal pattern those
  // up to the last row's.
  int64_t key_end(int64_t i0, int64_t rows) const { return spec.visible_keys(i0 + rows - 1); }
  int64_t visible(int64_t i, int64_t j0, int64_t cols) const {
    return std::clamp<int64_t>(spec.visible_keys(i) - j0, 0, cols);
  }
  // s = q_tile k[j0 .. j0 + cols)^T for the query rows [i0, i0 + rows) (q_tile, in C), scaled and
  // masked, row stride kKeyTile. k_tile receives the key tile in C, for the caller's products.
  const C* scores(const C* q_tile, int64_t i0, int64_t rows, int64_t j0, int64_t cols, C* s,
                  std::vector<C>& k_scratch) const {
    const int64_t e = spec.head_dim;
    const C* k_tile = widened(k + j0 * e, cols * e, k_scratch);
    gemm(false, true, rows, cols, e, q_tile, e, k_tile, e, C(0), s, kKeyTile);
    const C scale = static_cast<C>(spec.scale);
    for (int64_t r = 0; r < rows; ++r)
      simd_dispatch([&] {
        scale_and_mask(s + r * kKeyTile, visible(i0 + r, j0, cols), cols, scale, mask_row(i0 + r, j0));
      });
    return k_tile;
  }
};

template <class T, class M, class C = math::Compute<T>>
void forward_task(const Matrix<T, M>& x, int64_t i0, T* out, C* lse) {
  const AttentionSpec& spec = x.spec;
  const int64_t rows = std::min(kQueryTile, spec.L - i0), e = spec.head_dim, ev = spec.value_dim;
  const bool dropout = spec.dropout_p > 0;
  const C kept_scale = static_cast<C>(1.0 / (1.0 - spec.dropout_p));
  std::vector<C> s(static_cast<size_t>(kQueryTile * kKeyTile)), q_scratch, k_scratch, v_scratch;
  std::vector<uint8_t> keep(dropout ? kKeyTile : 0);
  C m[kQueryTile], l[kQueryTile];
  std::fill(m, m + rows, -std::numeric_limits<C>::infinity());
  std::fill(l, l + rows, C(0));
  const C* q_tile = widened(x.q + i0 * e, rows * e, q_scratch);
  Accumulator<C, T> o(out + (x.b * spec.L + i0) * ev, rows * ev);
  const int64_t key_end = x.key_end(i0, rows);
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, key_end - j0);
    x.scores(q_tile, i0, rows, j0, cols, s.data(), k_scratch);
    for (int64_t r = 0; r < rows; ++r) {
      C* sr = s.data() + r * kKeyTile;
      simd_dispatch([&] { online_softmax_row(sr, cols, m[r], l[r], o.data + r * ev, ev); });
      if (dropout) {
        dropout_keep_row(spec, x.b, i0 + r, j0, cols, keep.data());
        simd_dispatch([&] { apply_dropout(sr, keep.data(), cols, kept_scale, sr); });
      }
    }
    const C* v_tile = widened(x.v + j0 * ev, cols * ev, v_scratch);
    gemm(false, false, rows, ev, cols, s.data(), kKeyTile, v_tile, ev, C(1), o.data, ev);
  }
  for (int64_t r = 0; r < rows; ++r) {
    C* orow = o.data + r * ev;
    if (l[r] > C(0) || l[r] != l[r]) {  // (a NaN sum stays NaN)
      const C inv = C(1) / l[r];
      for (int64_t c = 0; c < ev; ++c) orow[c] *= inv;
      lse[x.b * spec.L + i0 + r] = m[r] + vmath::log(l[r]);
    } else {
      std::fill(orow, orow + ev, C(0));  // a row that attends to nothing
      lse[x.b * spec.L + i0 + r] = std::numeric_limits<C>::infinity();
    }
  }
  o.finish();
}

struct Gradients {
  const Tensor &g, &out, &lse, &grad_q, &grad_k, &grad_v;
};

template <class T, class M, class C = math::Compute<T>>
void backward_task(const Matrix<T, M>& x, const Gradients& t) {
  const AttentionSpec& spec = x.spec;
  const int64_t L = spec.L, S = spec.S, e = spec.head_dim, ev = spec.value_dim, b = x.b;
  const T* g = t.g.data<T>() + b * L * ev;
  const T* o = t.out.data<T>() + b * L * ev;
  const C* lse = t.lse.data<C>() + b * L;
  Accumulator<C, T> gq(t.grad_q.data<T>() + b * L * e, L * e), gk(t.grad_k.data<T>() + b * S * e, S * e),
      gv(t.grad_v.data<T>() + b * S * ev, S * ev);
  const bool dropout = spec.dropout_p > 0;
  const C kept_scale = static_cast<C>(1.0 / (1.0 - spec.dropout_p)), scale = static_cast<C>(spec.scale);
  const auto tile = static_cast<size_t>(kQueryTile * kKeyTile);
  std::vector<C> p(tile), dp(tile), dropped(dropout ? tile : 0), q_scratch, g_scratch, o_scratch, k_scratch, v_scratch;
  std::vector<uint8_t> keep(dropout ? tile : 0);
  C d[kQueryTile];
  for (int64_t i0 = 0; i0 < L; i0 += kQueryTile) {
    const int64_t rows = std::min(kQueryTile, L - i0);
    const C* q_tile = widened(x.q + i0 * e, rows * e, q_scratch);
    const C* g_tile = widened(g + i0 * ev, rows * ev, g_scratch);
    const C* o_tile = widened(o + i0 * ev, rows * ev, o_scratch);
    for (int64_t r = 0; r < rows; ++r) d[r] = dot_row(g_tile + r * ev, o_tile + r * ev, ev);
    const int64_t key_end = x.key_end(i0, rows);
    for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
      const int64_t cols = std::min(kKeyTile, key_end - j0);
      const C* k_tile = x.scores(q_tile, i0, rows, j0, cols, p.data(), k_scratch);
      for (int64_t r = 0; r < rows; ++r) {
        C* pr = p.data() + r * kKeyTile;
        simd_dispatch([&] { weights_from_lse(pr, cols, lse[i0 + r]); });
        if (dropout) {
          uint8_t* kr = keep.data() + r * kKeyTile;
          dropout_keep_row(spec, b, i0 + r, j0, cols, kr);
          simd_dispatch([&] { apply_dropout(pr, kr, cols, kept_scale, dropped.data() + r * kKeyTile); });
        }
      }
      // dv_j += (dropped weights)^T g_i; dp = g_i v_j^T
      const C* v_tile = widened(x.v + j0 * ev, cols * ev, v_scratch);
      gemm(true, false, cols, ev, rows, dropout ? dropped.data() : p.data(), kKeyTile, g_tile, ev, C(1),
           gv.data + j0 * ev, ev);
      gemm(false, true, rows, cols, ev, g_tile, ev, v_tile, ev, C(0), dp.data(), kKeyTile);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* kr = dropout ? keep.data() + r * kKeyTile : nullptr;
        simd_dispatch([&] {
          scores_grad_row(p.data() + r * kKeyTile, dp.data() + r * kKeyTile, kr, cols, kept_scale, d[r], scale);
        });
      }
      // dq_i += ds k_j; dk_j += ds^T q_i
      gemm(false, false, rows, e, cols, dp.data(), kKeyTile, k_tile, e, C(1), gq.data + i0 * e, e);
      gemm(true, false, cols, e, rows, dp.data(), kKeyTile, q_tile, e, C(1), gk.data + j0 * e, e);
    }
  }
  gq.finish();
  gk.finish();
  gv.finish();
}

// Runs fn<T, M>() for q's dtype and the mask's kind.
template <class Fn>
void dispatch_attention(const Tensor& q, const AttentionSpec& spec, Fn fn) {
  dispatch_floating_or_sixteen_bit(q.dtype(), "fused_attention", [&]<class T>() {
    using C = math::Compute<T>;
    switch (spec.mask.kind) {
      case MaskKind::None: return fn.template operator()<T, NoMask>();
      case MaskKind::Allowed: return fn.template operator()<T, uint8_t>();
      case MaskKind::Additive: return fn.template operator()<T, C>();
    }
  });
}

// Runs task(i) for i in [0, n) over the team. The region is entered whenever there are tasks to
// share, so the gemm inside a task always runs on the task's thread (Note [Attention tiles on
// the CPU]).
template <class Fn>
void for_each_task(int64_t n, int64_t work, Fn task) {
#pragma omp parallel for schedule(dynamic) if (n > 1 || work > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) task(i);
}

void fused_attention_forward_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                 const AttentionSpec& spec, const Tensor& out, const Tensor& lse) {
  dispatch_attention(q, spec, [&]<class T, class M>() {
    using C = math::Compute<T>;
    const int64_t tiles = (spec.L + kQueryTile - 1) / kQueryTile;
    const int64_t work = spec.batch * spec.L * spec.S * (spec.head_dim + spec.value_dim);
    T* po = out.data<T>();
    C* plse = lse.data<C>();
    for_each_task(spec.batch * tiles, work, [&](int64_t task) {
      const Matrix<T, M> x(spec, q, k, v, mask, task / tiles);
      forward_task(x, task % tiles * kQueryTile, po, plse);
    });
  });
}

void fused_attention_backward_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                  const AttentionSpec& spec, const Tensor& out, const Tensor& lse, const Tensor& g,
                                  const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const Gradients grads{g, out, lse, grad_q, grad_k, grad_v};
  dispatch_attention(q, spec, [&]<class T, class M>() {
    const int64_t work = spec.batch * spec.L * spec.S * (spec.head_dim + spec.value_dim);
    for_each_task(spec.batch, work, [&](int64_t b) { backward_task(Matrix<T, M>(spec, q, k, v, mask, b), grads); });
  });
}

const bool registered =
    kernels::add_kernel(kernels::fused_attention_forward, DeviceType::CPU, &fused_attention_forward_cpu,
                        kernels::SixteenBit::Native) &&
    kernels::add_kernel(kernels::fused_attention_backward, DeviceType::CPU, &fused_attention_backward_cpu,
                        kernels::SixteenBit::Native);

}  // namespace
}  // namespace ember::cpu
