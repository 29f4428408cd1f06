// CPU convolution through oneDNN (built with EMBER_DNNL; see core/cpu/dnnl_conv.h).
//
// Note [Convolution through oneDNN]
// oneDNN (the library PyTorch's CPU convolutions run on) has direct convolutions written for
// each instruction set, which read every input once instead of copying it KH*KW times into
// columns (Note [Convolution as im2col + gemm]). ember keeps its own kernels as the reference:
// the tests run both and compare, and cases oneDNN does not take run the reference.
//  - Layouts. ember's tensors are plain NCHW and OIHW. The primitives are asked for their
//    preferred layout ("any": channels in blocks of 8 on AVX2), and the input, weight and
//    output are reordered into it and back on every call. The reorders are memory-bound passes
//    over each tensor, a sizeable share of oneDNN's time in a ResNet-20 step; asked for plain
//    layouts instead, oneDNN falls back to an im2col + gemm of its own and the step is slower than
//    ember's reference, where the blocked kernels with their reorders are faster
//    (bench/RESULTS.md, "Convolution through oneDNN").
//  - Primitives are expensive to create (a JIT compile), so they are kept in a small cache keyed
//    by direction, geometry and thread count (dnnl_common::PrimitiveCache): a set_num_threads
//    call gets primitives made for the new count. oneDNN's OpenMP threads are ember's and
//    OpenBLAS's (docs/internals.md, "One thread pool"), so the count is ember's.
//  - Scratch memory (the primitives' scratchpads, the reordered tensors) comes from ember's
//    allocator, so the memory statistics count it, as they count the reference's columns.
//  - The bias stays with the op (core/ops/conv.cpp): one add and one sum on either path.
//  - Backward runs two primitives, the input's gradient and the weight's, and both read the output's
//    gradient in their own layout. When the two layouts agree (they do for every convolution of the
//    ResNet-20), the gradient is reordered once for both (kernels::conv2d_backward computes the two
//    together for this), one pass over an activation less per convolution.
//  - bfloat16: on a CPU with AVX512-BF16 the same primitives run on bfloat16 tensors (the
//    products in hardware, Note [bfloat16 products through oneDNN]); oneDNN accumulates in
//    float32 and rounds each output once, the numbers of the float32 convolution of the same
//    bfloat16 values, rounded, up to the order of the additions. Elsewhere a bfloat16
//    convolution is staged through float32 (core/cpu/conv.cpp).
#include "core/cpu/dnnl_conv.h"

#if EMBER_WITH_DNNL
#include <omp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/cpu/dnnl_common.h"
#include "core/cpu/dnnl_matmul.h"

namespace ember::cpu {
namespace {

using dnnl::memory;
using dnnl_common::cpu_engine;
using dnnl_common::Scratch;
using kernels::Window2d;
using Tag = memory::format_tag;

enum class Direction { Forward, BackwardInput, BackwardWeight };

// A tensor the primitive reads or writes: ember's plain layout and the primitive's own, with the
// reorder between them when they differ.
struct Operand {
  memory::desc plain, inner;
  std::optional<dnnl::reorder> reorder;  // plain -> inner for inputs, inner -> plain for the output

  Operand(const memory::desc& plain_desc, const memory::desc& inner_desc, bool is_output)
      : plain(plain_desc), inner(inner_desc) {
    if (plain == inner) return;
    const auto& engine = cpu_engine();
    reorder = is_output ? dnnl::reorder(memory(inner, engine), memory(plain, engine))
                        : dnnl::reorder(memory(plain, engine), memory(inner, engine));
  }
};

// One cached primitive: two inputs and one output, in the primitive's argument names.
struct Conv {
  dnnl::primitive primitive;
  memory::desc scratchpad;
  int arg_a, arg_b, arg_out;
  Operand a, b, out;
};

struct Key {
  Direction direction;
  Window2d g;
  int64_t oc;
  memory::data_type type;  // of all three tensors: f32 or bf16
  int threads;
  bool operator==(const Key& k) const {
    const Window2d& h = k.g;
    return direction == k.direction && oc == k.oc && type == k.type && threads == k.threads && g.n == h.n &&
           g.c == h.c &&
           g.h == h.h && g.w == h.w && g.kh == h.kh && g.kw == h.kw && g.sh == h.sh && g.sw == h.sw &&
           g.ph == h.ph && g.pw == h.pw && g.dh == h.dh && g.dw == h.dw && g.oh == h.oh && g.ow == h.ow;
  }
};


// oneDNN's "ref:" implementations are plain loops, slower than ember's im2col: those cases stay
// with the reference.
bool is_plain_loop(const dnnl::primitive_desc_base& pd) {
  return std::string_view(pd.impl_info_str()).starts_with("ref");
}

// Builds the primitive for `key`; null, or dnnl::error thrown, where oneDNN has no fast one.
std::shared_ptr<const Conv> create(const Key& key) {
  const Window2d& g = key.g;
  const memory::dims src{g.n, g.c, g.h, g.w}, wei{key.oc, g.c, g.kh, g.kw}, dst{g.n, key.oc, g.oh, g.ow};
  // oneDNN counts dilation from 0 (no gaps) and pads each side; ember pads both sides alike.
  const memory::dims stride{g.sh, g.sw}, dilation{g.dh - 1, g.dw - 1}, pad{g.ph, g.pw};
  const auto algo = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto& engine = cpu_engine();
  const auto any_desc = [&](const memory::dims& dims) { return memory::desc(dims, key.type, Tag::any); };
  const auto plain_desc = [&](const memory::dims& dims, Tag tag) { return memory::desc(dims, key.type, tag); };
  const dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, algo, any_desc(src), any_desc(wei), any_desc(dst), stride, dilation, pad,
       pad},
      attr, engine);
  if (is_plain_loop(forward)) return nullptr;
  const memory::desc src_plain = plain_desc(src, Tag::nchw), wei_plain = plain_desc(wei, Tag::oihw),
                     dst_plain = plain_desc(dst, Tag::nchw);
  switch (key.direction) {
    case Direction::Forward:
      return std::make_shared<const Conv>(Conv{
          dnnl::convolution_forward(forward), forward.scratchpad_desc(), DNNL_ARG_SRC,
          DNNL_ARG_WEIGHTS, DNNL_ARG_DST, Operand(src_plain, forward.src_desc(), false),
          Operand(wei_plain, forward.weights_desc(), false), Operand(dst_plain, forward.dst_desc(), true)});
    case Direction::BackwardInput: {
      const dnnl::convolution_backward_data::primitive_desc pd(
          {algo, any_desc(src), any_desc(wei), any_desc(dst), stride, dilation, pad, pad}, attr, engine, forward);
      if (is_plain_loop(pd)) return nullptr;
      return std::make_shared<const Conv>(Conv{
          dnnl::convolution_backward_data(pd), pd.scratchpad_desc(), DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS,
          DNNL_ARG_DIFF_SRC, Operand(dst_plain, pd.diff_dst_desc(), false),
          Operand(wei_plain, pd.weights_desc(), false), Operand(src_plain, pd.diff_src_desc(), true)});
    }
    case Direction::BackwardWeight: {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          {algo, any_desc(src), any_desc(wei), any_desc(dst), stride, dilation, pad, pad}, attr, engine, forward);
      if (is_plain_loop(pd)) return nullptr;
      return std::make_shared<const Conv>(Conv{
          dnnl::convolution_backward_weights(pd), pd.scratchpad_desc(), DNNL_ARG_DIFF_DST, DNNL_ARG_SRC,
          DNNL_ARG_DIFF_WEIGHTS, Operand(dst_plain, pd.diff_dst_desc(), false),
          Operand(src_plain, pd.src_desc(), false), Operand(wei_plain, pd.diff_weights_desc(), true)});
    }
  }
  return nullptr;
}

// ResNet-20 uses 24 primitives (8 geometries x 3 directions).
using Cache = dnnl_common::PrimitiveCache<Key, Conv, create, 64>;

Cache& cache() {
  static Cache instance;
  return instance;
}

std::atomic<int64_t> runs{0};

// An input in the primitive's layout: t itself, or t reordered into `scratch`.
memory in_layout(const Operand& op, const Tensor& t, Scratch& scratch, dnnl::stream& stream) {
  memory plain(op.plain, cpu_engine(), t.raw_data());
  if (!op.reorder) return plain;
  memory inner = scratch.view(op.inner);
  op.reorder->execute(stream, plain, inner);
  return inner;
}

// Runs `conv` on plain buffers a, b -> out, reordering where its layouts differ; a_ready, when
// given, is a already in the primitive's layout.
void execute(const Conv& conv, const Tensor& a, const Tensor& b, const Tensor& out,
             const std::optional<memory>& a_ready = std::nullopt) {
  const auto& engine = cpu_engine();
  dnnl::stream stream(engine);
  Scratch a_inner, b_inner, out_inner, pad;
  memory ma = a_ready ? *a_ready : in_layout(conv.a, a, a_inner, stream), mb = in_layout(conv.b, b, b_inner, stream);
  memory out_plain(conv.out.plain, engine, out.raw_data());
  memory mout = conv.out.reorder ? out_inner.view(conv.out.inner) : out_plain;
  std::unordered_map<int, memory> args{{conv.arg_a, ma}, {conv.arg_b, mb}, {conv.arg_out, mout}};
  if (conv.scratchpad.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, pad.view(conv.scratchpad));
  conv.primitive.execute(stream, args);
  if (conv.out.reorder) conv.out.reorder->execute(stream, mout, out_plain);
  stream.wait();
}

// The primitive for a -> out in `direction`, or null where oneDNN does not take the case.
std::shared_ptr<const Conv> primitive(Direction direction, const Tensor& a, const Tensor& b, const Window2d& g,
                                      int64_t oc, const Tensor& out) {
  const bool bfloat16 = a.dtype() == kBFloat16 && cpu_has_bfloat16_products();
  if ((a.dtype() != kFloat32 && !bfloat16) || b.dtype() != a.dtype() || out.dtype() != a.dtype()) return nullptr;
  if (g.n == 0 || g.c == 0 || oc == 0 || g.oh == 0 || g.ow == 0) return nullptr;
  const auto type = bfloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  return cache().get({direction, g, oc, type, omp_get_max_threads()});
}

}  // namespace

DnnlConvCounts dnnl_conv_counts() { return {runs.load(), cache().size()}; }

bool conv2d_forward_dnnl(const Tensor& x, const Tensor& weight, const Window2d& g, const Tensor& out) {
  const auto conv = primitive(Direction::Forward, x, weight, g, weight.size(0), out);
  if (!conv) return false;
  execute(*conv, x, weight, out);
  ++runs;
  return true;
}

bool conv2d_backward_dnnl(const Tensor& grad, const Tensor& x, const Tensor& weight, const Window2d& g,
                          const Tensor& grad_x, const Tensor& grad_weight) {
  const int64_t oc = weight.size(0);
  std::shared_ptr<const Conv> data, weights;
  if (grad_x.defined() && !(data = primitive(Direction::BackwardInput, grad, weight, g, oc, grad_x))) return false;
  if (grad_weight.defined() && !(weights = primitive(Direction::BackwardWeight, grad, x, g, oc, grad_weight)))
    return false;
  // The output's gradient once in the layout both primitives read (see the Note).
  Scratch shared;
  std::optional<memory> ready;
  if (data && weights && data->a.reorder && data->a.inner == weights->a.inner) {
    dnnl::stream stream(cpu_engine());
    ready = in_layout(data->a, grad, shared, stream);
    stream.wait();
  }
  if (data) execute(*data, grad, weight, grad_x, ready);
  if (weights) execute(*weights, grad, x, grad_weight, ready);
  runs += (data ? 1 : 0) + (weights ? 1 : 0);
  return true;
}

}  // namespace ember::cpu

#else  // built without oneDNN: every case runs the reference

namespace ember::cpu {

bool conv2d_forward_dnnl(const Tensor&, const Tensor&, const kernels::Window2d&, const Tensor&) { return false; }
bool conv2d_backward_dnnl(const Tensor&, const Tensor&, const Tensor&, const kernels::Window2d&, const Tensor&,
                          const Tensor&) {
  return false;
}
DnnlConvCounts dnnl_conv_counts() { return {0, 0}; }

}  // namespace ember::cpu

#endif
