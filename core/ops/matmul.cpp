// matmul: PyTorch's rules (1-D operands are promoted to a row/column and squeezed back, batch
// dims broadcast), one kernel call on [B, M, K] x [B, K, N].
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// A 3-D operand the kernel accepts: last two dims row- or column-major (see cpu/matmul.cpp).
bool gemm_compatible(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2), rs = t.stride(1), cs = t.stride(2);
  bool row_major = (cs == 1 || cols == 1) && (rs >= cols || rows == 1);
  bool col_major = (rs == 1 || rows == 1) && (cs >= rows || cols == 1);
  return row_major || col_major;
}

// [batch..., r, c] -> [B, r, c], broadcasting the batch dims; a 2-D operand becomes a stride-0
// batch (no copy).
Tensor as_batched(const Tensor& t, const Shape& batch, int64_t b) {
  Shape full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  Tensor out = t.dim() == 2 ? t.unsqueeze(0).expand({b, t.size(0), t.size(1)})
                            : t.expand(full).reshape({b, t.size(-2), t.size(-1)});
  return gemm_compatible(out) ? out : out.contiguous();
}

struct Matmul : Function<Matmul> {
  static constexpr const char* name = "matmul";
  static Tensor forward(Ctx& c, const Tensor& a, const Tensor& b) {
    const Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
    Shape batch = broadcast_shapes(batch_a, batch_b, name);
    const int64_t nb = numel_of(batch), m = a.size(-2), n = b.size(-1);
    Shape out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    c.save(a);
    c.save(b);
    Tensor out = ops::empty_on({nb, m, n}, a.dtype(), a.device());
    if (out.numel() > 0) kernels::matmul[a.device()](as_batched(a, batch, nb), as_batched(b, batch, nb), out);
    return out.view(out_shape);
  }
  static Grads backward(Ctx& c, const Tensor& g) {
    Tensor a = c.saved(0), b = c.saved(1);
    Tensor ga, gb;
    if (c.needs_input_grad(0)) ga = sum_to(matmul(g, b.transpose(-1, -2)), a.shape());
    if (c.needs_input_grad(1)) {
      if (b.dim() == 2 && a.dim() > 2) {  // shared weight: one gemm over the flattened batch
        gb = matmul(a.reshape({-1, a.size(-1)}).t(), g.reshape({-1, g.size(-1)}));
      } else {
        gb = sum_to(matmul(a.transpose(-1, -2), g), b.shape());
      }
    }
    return {ga, gb};
  }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  ops::check_defined(a, "matmul");
  ops::check_defined(b, "matmul");
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both arguments need at least 1 dim, got shapes ",
              shape_str(a.shape()), " and ", shape_str(b.shape()));
  ops::check_same_device(a, b, "matmul");
  EMBER_CHECK(a.dtype() == b.dtype(), "[matmul] expected one dtype, got ", a.dtype(), " and ", b.dtype());
  ops::check_floating(a, "matmul");
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(-1) : b;
  EMBER_CHECK(a2.size(-1) == b2.size(-2), "[matmul] shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
              " cannot be multiplied (", a2.size(-1), " != ", b2.size(-2), ")");
  Tensor out = Matmul::apply(a2, b2);
  if (b.dim() == 1) out = out.squeeze(-1);
  if (a.dim() == 1) out = out.squeeze(a.dim() == 1 && b.dim() == 1 ? 0 : -2);
  return out;
}

Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }

}  // namespace ember
