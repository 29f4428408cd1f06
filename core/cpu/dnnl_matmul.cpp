// bfloat16 products through oneDNN (core/cpu/dnnl_matmul.h).
//
// Note [bfloat16 products through oneDNN]
// A CPU with AVX512-BF16 multiplies pairs of bfloat16 numbers and adds them into float32 in one
// instruction (vdpbf16ps), twice the products per instruction of float32's FMA, so a bfloat16
// product can take about half the time of a float32 one (bench/RESULTS.md, "bfloat16 products
// through oneDNN"). OpenBLAS's bfloat16 gemm is not in Debian's build; oneDNN's matmul
// primitive has it, and it accumulates in float32 and rounds each output once into bfloat16, the
// same numbers as the float32 product of the same bfloat16 inputs, rounded (the staged path,
// Note [Sixteen-bit floats through float32]), up to the order of the float32 additions.
//  - The operands are ember's tensors in place: a batch of one level (a 3-D desc with its batch
//    stride; a stride of 0 is a batch dimension of 1, which oneDNN broadcasts) and the last two
//    dims row- or column-major (a transposed view), as gemm_layout reads them. An operand whose
//    batch does not fold into one level is copied first: attention's per-head views of [batch,
//    tokens, heads, features] are such batches, and oneDNN 2.6 multiplies them (as one call per
//    outer matrix, its heads the batch) only with a generic gemm, a large part of the GPT's step
//    under autocast (bench/RESULTS.md, "Mixed precision on a CPU with AVX512-BF16"); the copy is
//    the size of one operand, a small part of the product's time.
//  - accumulate (out holds a bias, Note [A bias in the product]) is oneDNN's sum post-op: out =
//    round(a @ c + out), added in float32.
//  - Primitives are cached by shapes, strides and thread count (dnnl_common::PrimitiveCache).
//  - The path runs where the CPU has AVX512-BF16 and the gemm backend is oneDNN; elsewhere (and
//    for float16, which has no such instruction here) the product is staged through float32, so
//    set_gemm_backend(GemmBackend::OpenBLAS) also gives the reference for the tests.
#include "core/cpu/dnnl_matmul.h"

#include "core/cpu_settings.h"

#if EMBER_WITH_DNNL
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/cpu/dnnl_common.h"
#include "core/kernel_bodies/gemm_layout.h"
#endif

namespace ember::cpu {

bool cpu_has_bfloat16_products() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

#if EMBER_WITH_DNNL
namespace {

using dnnl::memory;

struct Key {
  memory::dims a_dims, a_strides, c_dims, c_strides, out_dims;
  bool accumulate;
  int threads;
  bool operator==(const Key&) const = default;
};

struct Product {
  dnnl::matmul primitive;
  memory::desc a, c, out, scratchpad;
};

std::shared_ptr<const Product> create(const Key& key) {
  const auto bf16 = memory::data_type::bf16;
  const memory::desc a(key.a_dims, bf16, key.a_strides), c(key.c_dims, bf16, key.c_strides),
      out(key.out_dims, bf16, memory::format_tag::abc);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr.set_post_ops(sum);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, c, out), attr, dnnl_common::cpu_engine());
  if (std::string_view(pd.impl_info_str()).starts_with("ref")) return nullptr;  // a plain loop
  return std::make_shared<const Product>(Product{dnnl::matmul(pd), a, c, out, pd.scratchpad_desc()});
}

using Cache = dnnl_common::PrimitiveCache<Key, Product, create, 64>;

Cache& cache() {
  static Cache instance;
  return instance;
}

std::atomic<int64_t> runs{0};

// One batch level of an operand: matrix i starts at i * stride.
struct Level {
  int64_t count, stride;
};

// The operand's dims and strides as oneDNN reads them: [batch, rows, cols].
void describe(const Tensor& t, const Level& level, memory::dims& dims, memory::dims& strides) {
  const kernels::GemmLayout layout = kernels::gemm_layout(t);
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const bool broadcast = level.stride == 0 || level.count == 1;
  dims = {broadcast ? 1 : level.count, rows, cols};
  const int64_t matrix = std::max<int64_t>(rows * cols, 1);
  strides = {broadcast ? matrix : level.stride, layout.transposed ? 1 : layout.ld, layout.transposed ? layout.ld : 1};
}

// Products [count, M, K] x [count, K, N] -> out.
bool run_level(const Tensor& a, const Tensor& c, const Tensor& out, bool accumulate, const Level& la, const Level& lc,
               int64_t count) {
  Key key;
  describe(a, la, key.a_dims, key.a_strides);
  describe(c, lc, key.c_dims, key.c_strides);
  key.out_dims = {count, a.size(-2), c.size(-1)};
  key.accumulate = accumulate;
  key.threads = omp_get_max_threads();
  const auto product = cache().get(key);
  if (!product) return false;
  const auto& engine = dnnl_common::cpu_engine();
  auto* a_data = const_cast<bfloat16*>(a.data<bfloat16>());
  auto* c_data = const_cast<bfloat16*>(c.data<bfloat16>());
  dnnl::stream stream(engine);
  dnnl_common::Scratch pad;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(product->a, engine, a_data)},
                                       {DNNL_ARG_WEIGHTS, memory(product->c, engine, c_data)},
                                       {DNNL_ARG_DST, memory(product->out, engine, out.data<bfloat16>())}};
  if (product->scratchpad.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, pad.view(product->scratchpad));
  product->primitive.execute(stream, args);
  stream.wait();
  ++runs;
  return true;
}

// The batch as one level, when its matrices lie at multiples of one stride.
std::optional<Level> one_level(const kernels::GemmBatch& b) {
  if (!b.folds()) return std::nullopt;
  return Level{b.count(), b.inner == 1 ? b.outer_stride : b.inner_stride};
}

// An operand whose batch does not lie at multiples of one stride, copied into one that does (see
// the Note), so that every product is a single call. A transposed matrix stays transposed, so the
// copy reads and writes whole rows instead of gathering single elements.
Tensor with_one_level(const Tensor& t) {
  if (one_level(kernels::gemm_batch(t))) return t;
  if (kernels::gemm_layout(t).transposed) return t.transpose(-2, -1).contiguous().transpose(-2, -1);
  return t.contiguous();
}

}  // namespace

bool matmul_bfloat16_dnnl(const Tensor& a, const Tensor& c, const Tensor& out, bool accumulate) {
  if (!cpu_has_bfloat16_products() || gemm_backend() != GemmBackend::OneDNN) return false;
  const int64_t m = a.size(-2), k = a.size(-1), n = c.size(-1);
  if (m == 0 || n == 0 || k == 0) return false;
  const Tensor a_one = with_one_level(a), c_one = with_one_level(c);
  const kernels::GemmBatch ba = kernels::gemm_batch(a_one), bc = kernels::gemm_batch(c_one);
  const auto la = one_level(ba), lc = one_level(bc);
  return la && lc && run_level(a_one, c_one, out, accumulate, *la, *lc, ba.count());
}

int64_t dnnl_matmul_runs() { return runs.load(); }

#else  // built without oneDNN: every bfloat16 product is staged through float32

bool matmul_bfloat16_dnnl(const Tensor&, const Tensor&, const Tensor&, bool) { return false; }
int64_t dnnl_matmul_runs() { return 0; }

#endif

}  // namespace ember::cpu
