// CUDA kernels of fused attention (Note [Fused attention] in core/ops/fused_attention.cpp), with
// the mask, causal and dropout rules the CPU's use (core/kernel_bodies/fused_attention.h).
//
// Note [Fused attention on CUDA]
// The first CUDA version, written for being read and checked rather than for speed: plain
// shared-memory tiles, no tensor cores. The forward gives one block to each tile of kRows query
// rows of one matrix; the block walks the keys kCols at a time with the online softmax, a thread
// per (row, key) pair for the scores, a thread per row for the running maximum and sum, a thread
// per (row, feature) for the output. The backward is two kernels that add up in one fixed order,
// with no atomics, so results are the same on every run: one block per key tile walks the query
// tiles for dk and dv, one block per query tile walks the key tiles for dq (each recomputes the
// weights from the log-sum-exp, the price of determinism), after a kernel that takes each row's
// D = dO . O. float and double; the kernel table stages bfloat16 and float16 through float32.
// Until scripts/gpu-check has run it on a GPU, Auto keeps CUDA on the math path and this kernel
// runs only when AttentionBackend::Fused is forced (core/ops/fused_attention.cpp).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/kernels/fused_attention.h"
#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

using kernels::AttentionMaskLayout;
using kernels::AttentionSpec;

constexpr int kRows = 16;     // query rows per tile
constexpr int kCols = 16;     // keys per tile
constexpr int kThreads = 128;

struct NoMask {};

// +inf in T on the device (std::numeric_limits' functions are host-only for nvcc).
template <class T>
__device__ T infinity() {
  return static_cast<T>(INFINITY);
}

// The scaled and masked score of (i, j) from a query row and a key row in shared memory; -inf
// where the causal pattern or the mask hides the key.
template <class T, class M>
__device__ T masked_score(const AttentionSpec& spec, const M* mask, const T* q_row, const T* k_row, int64_t i,
                          int64_t j) {
  if (j >= spec.visible_keys(i)) return -infinity<T>();
  T dot = 0;
  for (int64_t e = 0; e < spec.head_dim; ++e) dot += q_row[e] * k_row[e];
  const T x = dot * static_cast<T>(spec.scale);
  if constexpr (std::is_same_v<M, uint8_t>) {
    return mask[i * spec.mask.row_stride + j * spec.mask.col_stride] != 0 ? x : -infinity<T>();
  } else if constexpr (std::is_same_v<M, T>) {
    return x + mask[i * spec.mask.row_stride + j * spec.mask.col_stride];
  } else {
    return x;
  }
}

// Matrix b's mask element (0, 0), or null without a mask.
template <class M>
__device__ const M* matrix_mask(const M* base, const AttentionSpec& spec, int64_t b) {
  if constexpr (std::is_same_v<M, NoMask>) return nullptr;
  else return base + spec.mask.base(b);
}

// Copies rows [first, first + count) of a [n, width] matrix into shared memory as [tile, width],
// zeros past count.
template <class T>
__device__ void load_rows(const T* from, int64_t first, int count, int tile, int64_t width, T* to) {
  for (int64_t idx = threadIdx.x; idx < tile * width; idx += blockDim.x) {
    const int64_t r = idx / width;
    to[idx] = r < count ? from[(first + r) * width + idx % width] : T(0);
  }
}

template <class T, class M>
__global__ void forward_kernel(const T* q, const T* k, const T* v, const M* mask_base, AttentionSpec spec, T* out,
                               T* lse) {
  extern __shared__ unsigned char shared_bytes[];
  const int64_t E = spec.head_dim, Ev = spec.value_dim, L = spec.L, S = spec.S, b = blockIdx.y;
  T* qs = reinterpret_cast<T*>(shared_bytes);  // [kRows, E]
  T* ks = qs + kRows * E;                        // [kCols, E]
  T* vs = ks + kCols * E;                        // [kCols, Ev]
  T* os = vs + kCols * Ev;                       // [kRows, Ev]: the running numerators
  T* ss = os + kRows * Ev;                       // [kRows, kCols]: scores, then weights
  T* m = ss + kRows * kCols;                     // [kRows] running maxima
  T* l = m + kRows;                              // [kRows] running sums
  T* alpha = l + kRows;                          // [kRows] this tile's rescaling
  const M* mask = matrix_mask(mask_base, spec, b);
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), L - i0));
  load_rows(q + b * L * E, i0, rows, kRows, E, qs);
  for (int64_t idx = threadIdx.x; idx < kRows * Ev; idx += blockDim.x) os[idx] = T(0);
  if (threadIdx.x < kRows) {
    m[threadIdx.x] = -infinity<T>();
    l[threadIdx.x] = T(0);
  }
  const T kept_scale = static_cast<T>(1.0 / (1.0 - spec.dropout_p));
  const int64_t key_end = spec.visible_keys(i0 + rows - 1);
  for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
    const int cols = static_cast<int>(min(static_cast<int64_t>(kCols), key_end - j0));
    __syncthreads();  // the previous tile's products are done with ks, vs and ss
    load_rows(k + b * S * E, j0, cols, kCols, E, ks);
    load_rows(v + b * S * Ev, j0, cols, kCols, Ev, vs);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kRows * kCols; idx += blockDim.x) {
      const int r = idx / kCols, c = idx % kCols;
      ss[idx] = r < rows && c < cols ? masked_score(spec, mask, qs + r * E, ks + c * E, i0 + r, j0 + c)
                                     : -infinity<T>();
    }
    __syncthreads();
    if (threadIdx.x < rows) {  // the online softmax of row r (Note [Fused attention])
      const int r = threadIdx.x;
      T* sr = ss + r * kCols;
      T tile_max = -infinity<T>();
      for (int c = 0; c < cols; ++c) tile_max = sr[c] > tile_max || isnan(sr[c]) ? sr[c] : tile_max;
      const T m_new = tile_max > m[r] || isnan(tile_max) ? tile_max : m[r];
      if (m_new == -infinity<T>()) {
        for (int c = 0; c < kCols; ++c) sr[c] = T(0);
        alpha[r] = T(1);
      } else {
        T sum = 0;
        for (int c = 0; c < kCols; ++c) {
          const T p = c < cols ? exp(sr[c] - m_new) : T(0);
          sum += p;
          sr[c] = spec.dropout_p > 0 && c < cols ? (spec.keeps(b, i0 + r, j0 + c) ? p * kept_scale : T(0)) : p;
        }
        alpha[r] = exp(m[r] - m_new);
        l[r] = l[r] * alpha[r] + sum;
        m[r] = m_new;
      }
    }
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < rows * Ev; idx += blockDim.x) {
      const int64_t r = idx / Ev, e = idx % Ev;
      T acc = os[idx] * alpha[r];
      for (int c = 0; c < cols; ++c) acc += ss[r * kCols + c] * vs[c * Ev + e];
      os[idx] = acc;
    }
  }
  __syncthreads();
  for (int64_t idx = threadIdx.x; idx < rows * Ev; idx += blockDim.x) {
    const int64_t r = idx / Ev;
    const bool sees = l[r] > T(0) || isnan(l[r]);
    out[(b * L + i0) * Ev + idx] = sees ? os[idx] / l[r] : T(0);
  }
  if (threadIdx.x < rows) {
    const int r = threadIdx.x;
    const bool sees = l[r] > T(0) || isnan(l[r]);
    lse[b * L + i0 + r] = sees ? m[r] + log(l[r]) : infinity<T>();
  }
}

// D[b, i] = dO_i . O_i, one thread per row.
template <class T>
__global__ void row_dot_kernel(const T* g, const T* o, int64_t rows, int64_t width, T* d) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T acc = 0;
    for (int64_t e = 0; e < width; ++e) acc += g[r * width + e] * o[r * width + e];
    d[r] = acc;
  }
}

// For query rows [i0, i0 + rows) (q, g, lse and D of them in shared memory) and keys
// [j0, j0 + cols): the dropped weights into pz and the score gradients, scale folded in, into ds.
template <class T, class M>
__device__ void weights_and_score_grads(const AttentionSpec& spec, const M* mask, int64_t b, int64_t i0, int rows,
                                        int64_t j0, int cols, const T* qs, const T* gs, const T* ks, const T* vs,
                                        const T* lse_s, const T* d_s, T* pz, T* ds) {
  const T kept_scale = static_cast<T>(1.0 / (1.0 - spec.dropout_p));
  for (int idx = threadIdx.x; idx < kRows * kCols; idx += blockDim.x) {
    const int r = idx / kCols, c = idx % kCols;
    if (r >= rows || c >= cols) {
      pz[idx] = ds[idx] = T(0);
      continue;
    }
    const int64_t i = i0 + r, j = j0 + c;
    const T p = exp(masked_score(spec, mask, qs + r * spec.head_dim, ks + c * spec.head_dim, i, j) - lse_s[r]);
    const T z = spec.dropout_p > 0 ? (spec.keeps(b, i, j) ? kept_scale : T(0)) : T(1);
    T dp = 0;
    for (int64_t e = 0; e < spec.value_dim; ++e) dp += gs[r * spec.value_dim + e] * vs[c * spec.value_dim + e];
    pz[idx] = p * z;
    ds[idx] = p * (dp * z - d_s[r]) * static_cast<T>(spec.scale);
  }
}

// acc[x, e] += sum over n < inner of a[x * a_x + n * a_n] * b[n, e], for x < count and e < width:
// a tile product added into a sum in shared memory, one thread per (x, e), n in order. The
// backward's three products, a^T b (a_x = 1) or a b (a_n = 1).
template <class T>
__device__ void add_tile_product(T* acc, int count, int64_t width, int inner, const T* a, int64_t a_x, int64_t a_n,
                                 const T* b) {
  for (int64_t idx = threadIdx.x; idx < count * width; idx += blockDim.x) {
    const int64_t x = idx / width, e = idx % width;
    T sum = acc[idx];
    for (int n = 0; n < inner; ++n) sum += a[x * a_x + n * a_n] * b[n * width + e];
    acc[idx] = sum;
  }
}

// The shared memory both backward kernels lay out the same way.
template <class T>
struct BackwardTiles {
  T *qs, *gs, *ks, *vs, *pz, *ds, *lse_s, *d_s, *acc_a, *acc_b;
  __device__ BackwardTiles(unsigned char* bytes, int64_t E, int64_t Ev) {
    qs = reinterpret_cast<T*>(bytes);  // [kRows, E]
    gs = qs + kRows * E;               // [kRows, Ev]
    ks = gs + kRows * Ev;              // [kCols, E]
    vs = ks + kCols * E;               // [kCols, Ev]
    pz = vs + kCols * Ev;              // [kRows, kCols]
    ds = pz + kRows * kCols;           // [kRows, kCols]
    lse_s = ds + kRows * kCols;        // [kRows]
    d_s = lse_s + kRows;               // [kRows]
    acc_a = d_s + kRows;               // dk [kCols, E] or dq [kRows, E]
    acc_b = acc_a + kCols * E;         // dv [kCols, Ev]
  }
};

template <class T>
__device__ void load_query_side(const T* q, const T* g, const T* lse, const T* d, int64_t b, int64_t i0, int rows,
                                const AttentionSpec& spec, BackwardTiles<T>& t) {
  load_rows(q + b * spec.L * spec.head_dim, i0, rows, kRows, spec.head_dim, t.qs);
  load_rows(g + b * spec.L * spec.value_dim, i0, rows, kRows, spec.value_dim, t.gs);
  if (threadIdx.x < kRows) {
    const bool in = static_cast<int>(threadIdx.x) < rows;
    t.lse_s[threadIdx.x] = in ? lse[b * spec.L + i0 + threadIdx.x] : infinity<T>();
    t.d_s[threadIdx.x] = in ? d[b * spec.L + i0 + threadIdx.x] : T(0);
  }
}

// One block per key tile: dk and dv over every query tile that sees it.
template <class T, class M>
__global__ void key_grads_kernel(const T* q, const T* k, const T* v, const M* mask_base, AttentionSpec spec,
                                 const T* lse, const T* d, const T* g, T* grad_k, T* grad_v) {
  extern __shared__ unsigned char shared_bytes[];
  const int64_t E = spec.head_dim, Ev = spec.value_dim, L = spec.L, S = spec.S, b = blockIdx.y;
  BackwardTiles<T> t(shared_bytes, E, Ev);
  const M* mask = matrix_mask(mask_base, spec, b);
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kCols;
  const int cols = static_cast<int>(min(static_cast<int64_t>(kCols), S - j0));
  load_rows(k + b * S * E, j0, cols, kCols, E, t.ks);
  load_rows(v + b * S * Ev, j0, cols, kCols, Ev, t.vs);
  for (int64_t idx = threadIdx.x; idx < kCols * E; idx += blockDim.x) t.acc_a[idx] = T(0);
  for (int64_t idx = threadIdx.x; idx < kCols * Ev; idx += blockDim.x) t.acc_b[idx] = T(0);
  // With the causal pattern, rows before j0 see none of these keys.
  const int64_t first = spec.causal ? j0 / kRows * kRows : 0;
  for (int64_t i0 = first; i0 < L; i0 += kRows) {
    const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), L - i0));
    __syncthreads();
    load_query_side(q, g, lse, d, b, i0, rows, spec, t);
    __syncthreads();
    weights_and_score_grads(spec, mask, b, i0, rows, j0, cols, t.qs, t.gs, t.ks, t.vs, t.lse_s, t.d_s, t.pz, t.ds);
    __syncthreads();
    add_tile_product(t.acc_b, cols, Ev, rows, t.pz, 1, kCols, t.gs);  // dv_j += pz^T g_i
    add_tile_product(t.acc_a, cols, E, rows, t.ds, 1, kCols, t.qs);   // dk_j += ds^T q_i
  }
  __syncthreads();
  for (int64_t idx = threadIdx.x; idx < cols * E; idx += blockDim.x) grad_k[(b * S + j0) * E + idx] = t.acc_a[idx];
  for (int64_t idx = threadIdx.x; idx < cols * Ev; idx += blockDim.x) grad_v[(b * S + j0) * Ev + idx] = t.acc_b[idx];
}

// One block per query tile: dq over every key tile it sees.
template <class T, class M>
__global__ void query_grads_kernel(const T* q, const T* k, const T* v, const M* mask_base, AttentionSpec spec,
                                   const T* lse, const T* d, const T* g, T* grad_q) {
  extern __shared__ unsigned char shared_bytes[];
  const int64_t E = spec.head_dim, Ev = spec.value_dim, L = spec.L, S = spec.S, b = blockIdx.y;
  BackwardTiles<T> t(shared_bytes, E, Ev);
  const M* mask = matrix_mask(mask_base, spec, b);
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), L - i0));
  load_query_side(q, g, lse, d, b, i0, rows, spec, t);
  for (int64_t idx = threadIdx.x; idx < kRows * E; idx += blockDim.x) t.acc_a[idx] = T(0);
  const int64_t key_end = spec.visible_keys(i0 + rows - 1);
  for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
    const int cols = static_cast<int>(min(static_cast<int64_t>(kCols), key_end - j0));
    __syncthreads();
    load_rows(k + b * S * E, j0, cols, kCols, E, t.ks);
    load_rows(v + b * S * Ev, j0, cols, kCols, Ev, t.vs);
    __syncthreads();
    weights_and_score_grads(spec, mask, b, i0, rows, j0, cols, t.qs, t.gs, t.ks, t.vs, t.lse_s, t.d_s, t.pz, t.ds);
    __syncthreads();
    add_tile_product(t.acc_a, rows, E, cols, t.ds, kCols, 1, t.ks);  // dq_i += ds k_j
  }
  __syncthreads();
  for (int64_t idx = threadIdx.x; idx < rows * E; idx += blockDim.x) grad_q[(b * L + i0) * E + idx] = t.acc_a[idx];
}

// Launches kernel on `device`'s stream with `shared` bytes of dynamic shared memory, raising the
// kernel's limit first where it passes the default 48 KB.
template <class... Params, class... Args>
void launch(Device device, dim3 grid, size_t shared, void (*kernel)(Params...), Args... args) {
  if (grid.x == 0 || grid.y == 0) return;
  DeviceGuard guard(device.index);
  if (shared > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  kernel<<<grid, kThreads, shared, stream(device.index)>>>(args...);
  CUDA_CHECK(cudaGetLastError());
}

template <class Fn>
void dispatch_attention(const Tensor& q, const AttentionSpec& spec, Fn fn) {
  dispatch_floating(q.dtype(), "fused_attention", [&]<class T>() {
    switch (spec.mask.kind) {
      case AttentionMaskLayout::Kind::None: return fn.template operator()<T, NoMask>();
      case AttentionMaskLayout::Kind::Allowed: return fn.template operator()<T, uint8_t>();
      case AttentionMaskLayout::Kind::Additive: return fn.template operator()<T, T>();
    }
  });
}

template <class M>
const M* mask_data(const Tensor& mask) {
  if constexpr (std::is_same_v<M, NoMask>) return nullptr;
  else return mask.data<M>();
}

dim3 tiles(int64_t n, int tile, int64_t batch) {
  return dim3(static_cast<unsigned>((n + tile - 1) / tile), static_cast<unsigned>(batch));
}

void fused_attention_forward_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                  const AttentionSpec& spec, const Tensor& out, const Tensor& lse) {
  dispatch_attention(q, spec, [&]<class T, class M>() {
    const size_t shared =
        sizeof(T) * static_cast<size_t>((kRows + kCols) * spec.head_dim + (kCols + kRows) * spec.value_dim +
                                        kRows * kCols + 3 * kRows);
    launch(q.device(), tiles(spec.L, kRows, spec.batch), shared, forward_kernel<T, M>, q.data<T>(), k.data<T>(),
           v.data<T>(), mask_data<M>(mask), spec, out.data<T>(), lse.data<T>());
  });
}

void fused_attention_backward_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                   const AttentionSpec& spec, const Tensor& out, const Tensor& lse, const Tensor& g,
                                   const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  dispatch_attention(q, spec, [&]<class T, class M>() {
    const Tensor d = empty({spec.batch * spec.L}, TensorOptions(q.dtype()).with_device(q.device()));
    const int64_t rows = spec.batch * spec.L;
    if (rows > 0) {
      DeviceGuard guard(q.device().index);
      const auto blocks = static_cast<unsigned>(std::min((rows + kThreads - 1) / kThreads, kMaxBlocks));
      row_dot_kernel<T><<<blocks, kThreads, 0, stream(q.device().index)>>>(g.data<T>(), out.data<T>(), rows,
                                                                           spec.value_dim, d.data<T>());
      CUDA_CHECK(cudaGetLastError());
    }
    const int64_t E = spec.head_dim, Ev = spec.value_dim;
    const size_t shared = sizeof(T) * static_cast<size_t>(kRows * E + kRows * Ev + kCols * E + kCols * Ev +
                                                          2 * kRows * kCols + 2 * kRows +
                                                          std::max(kCols, kRows) * E + kCols * Ev);
    launch(q.device(), tiles(spec.S, kCols, spec.batch), shared, key_grads_kernel<T, M>, q.data<T>(), k.data<T>(),
           v.data<T>(), mask_data<M>(mask), spec, lse.data<T>(), d.data<T>(), g.data<T>(), grad_k.data<T>(),
           grad_v.data<T>());
    launch(q.device(), tiles(spec.L, kRows, spec.batch), shared, query_grads_kernel<T, M>, q.data<T>(), k.data<T>(),
           v.data<T>(), mask_data<M>(mask), spec, lse.data<T>(), d.data<T>(), g.data<T>(), grad_q.data<T>());
  });
}

const bool registered =
    kernels::add_kernel(kernels::fused_attention_forward, DeviceType::CUDA, &fused_attention_forward_cuda) &&
    kernels::add_kernel(kernels::fused_attention_backward, DeviceType::CUDA, &fused_attention_backward_cuda);

}  // namespace
}  // namespace ember::cuda
