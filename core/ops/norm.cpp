// Vector norms and what is built on them: vector_norm (a Function with PyTorch's gradient at
// zero), normalize (composed), cosine_similarity (a Function with PyTorch 2's gradient).
#include <cmath>
#include <optional>

#include "core/autocast.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// 16-bit tensors compute in float32 (the sums of powers would round at every term otherwise).
Tensor computing_dtype(const Tensor& x) { return is_sixteen_bit(x.dtype()) ? x.to(kFloat32) : x; }

// v where keep is 0, zero where it is 1.
Tensor zero_where(const Tensor& keep, const Tensor& v) { return where(keep, ops::wrap_scalar(0.0, v), v); }

// The norm over dims (normalized, kept as size 1) of x in its computing dtype.
Tensor norm_kept(const Tensor& x, double ord, const Shape& dims) {
  if (ord == 2.0) return sqrt(sum(x * x, dims, true));
  if (ord == 1.0) return sum(abs(x), dims, true);
  if (std::isinf(ord)) return ord > 0 ? max(abs(x), dims, true) : min(abs(x), dims, true);
  if (ord == 0.0) return sum(ne(x, ops::wrap_scalar(0.0, x)).to(x.dtype()), dims, true);
  return pow(sum(pow(abs(x), ord), dims, true), 1.0 / ord);
}

// Note [Norm gradients]
// The gradient of ||x||_p with respect to x is sign(x) |x|^(p-1) / ||x||^(p-1), which is 0/0 where
// the norm is 0. PyTorch takes 0 there (a subgradient), and so does ember, case by case as the
// formula simplifies: p = 1 is sign(x); p = 2 is x / ||x|| (0 where the norm is 0); p = inf or
// -inf shares the gradient evenly between the elements whose |x| is the norm (as max and min do
// with ties), signed; p = 0 (a count) has none; other p < 1 write the formula as sign(x) |x|^(p-1)
// ||x||^(1-p), with 0 where x is 0 (|x|^(p-1) is inf there), and other p > 1 as given, with 0
// where the norm is 0. A NaN in x counts as attaining an inf norm, so its NaN flows back.
struct VectorNorm : Function<VectorNorm> {
  static constexpr const char* name = "vector_norm";
  struct State {
    double ord;
    Shape dims;        // normalized
    Shape kept_shape;  // the norm's shape with keepdim
    autograd::SavedRef input, norm;  // norm: kept shape, in the computing dtype
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, double ord, const Shape& dims, bool keepdim) {
    const Shape norm_dims = ops::normalize_dims(dims, x.dim(), name);
    if (std::isinf(ord) && x.dim() > 0)  // a 0-d x has one element
      for (int64_t d : norm_dims)
        EMBER_CHECK(x.size(d) > 0, "[vector_norm] cannot take the ", ord, " norm over dim ", d, " of a tensor of shape ",
                    shape_str(x.shape()), ": the dim is empty and max and min have no value for it");
    const Tensor n = norm_kept(computing_dtype(x), ord, norm_dims);
    s = {ord, norm_dims, n.shape(), c.save(x), c.save(n)};
    const Tensor out = keepdim ? n : n.reshape(ops::squeezed_shape(x.shape(), norm_dims));
    return out.to(x.dtype());
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const double p = s.ord;
    if (p == 0.0) return {Tensor()};
    const Tensor n = c.get(s.norm), x = c.get(s.input).to(n.dtype()), gk = g.reshape(s.kept_shape).to(n.dtype());
    if (p == 1.0) return {gk * sign(x)};
    const Tensor norm_is_zero = eq(n, ops::wrap_scalar(0.0, n));
    if (p == 2.0) return {gk * zero_where(norm_is_zero, x / n)};
    const Tensor ax = abs(x);
    if (std::isinf(p)) {
      const Tensor attains = maximum(eq(ax, n), ne(ax, ax)).to(n.dtype());
      return {sign(x) * attains * (gk / sum(attains, s.dims, true))};
    }
    if (p < 1.0) return {sign(x) * zero_where(eq(x, ops::wrap_scalar(0.0, x)), pow(ax, p - 1.0)) * gk * pow(n, 1.0 - p)};
    return {sign(x) * pow(ax, p - 1.0) * zero_where(norm_is_zero, gk / pow(n, p - 1.0))};
  }
};

// Note [Cosine similarity as PyTorch 2]
// PyTorch 2 computes sum((x1 / n1) * (x2 / n2)) along dim, each n the side's 2-norm clamped at
// eps, rather than 1.13's dot / sqrt(clamp(|x1|^2 |x2|^2, eps^2)): dividing first keeps the result
// within [-1, 1]. It clamps the norms in place with autograd off, so the gradient flows through
// each norm as if it had not been clamped: d(x / n)/dx = 1/n - x (x / ||x||)^T / n^2 with n the
// clamped norm and ||x|| the true one (x / ||x|| taken as 0 at 0, Note [Norm gradients]). A
// composition of clamp_min would zero that second term below eps instead, so this is a Function
// whose backward writes PyTorch's gradient out; both sides broadcast first, and the node sums
// each gradient back to its side's shape.
struct CosineSimilarity : Function<CosineSimilarity> {
  static constexpr const char* name = "cosine_similarity";
  struct State {
    int64_t dim;  // wrapped, in the broadcast shape
    double eps;
    autograd::SavedRef x1, x2;  // broadcast, in the computing dtype
  };
  // x / its clamped norm, the true norm and the clamped one, along dim (kept).
  struct Scaled {
    Tensor unit, norm, clamped;
  };
  static Scaled scaled(const Tensor& x, int64_t dim, double eps) {
    const Tensor n = vector_norm(x, 2.0, {dim}, true), clamped = clamp_min(n, eps);
    return {x / clamped, n, clamped};
  }
  static Tensor forward(Ctx& c, State& s, const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
    const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), name);
    const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), name);
    const DType dtype = promote(x1.dtype(), x2.dtype());
    const Tensor a = computing_dtype(x1.to(dtype).expand(shape)), b = computing_dtype(x2.to(dtype).expand(shape));
    s = {d, eps, c.save(a), c.save(b)};
    return sum(scaled(a, d, eps).unit * scaled(b, d, eps).unit, {d}).to(dtype);
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const Tensor a = c.get(s.x1), b = c.get(s.x2), gk = g.unsqueeze(s.dim).to(a.dtype());
    const Scaled sa = scaled(a, s.dim, s.eps), sb = scaled(b, s.dim, s.eps);
    // The gradient reaching x from d(x / n), given the gradient u of x / n.
    auto through_unit = [&](const Tensor& x, const Scaled& sx, const Tensor& u) {
      const Tensor direction = zero_where(eq(sx.norm, ops::wrap_scalar(0.0, sx.norm)), x / sx.norm);
      return u / sx.clamped - direction * (sum(u * x, {s.dim}, true) / (sx.clamped * sx.clamped));
    };
    return {c.needs_input_grad(0) ? through_unit(a, sa, gk * sb.unit) : Tensor(),
            c.needs_input_grad(1) ? through_unit(b, sb, gk * sa.unit) : Tensor()};
  }
};

}  // namespace

// vector_norm and cosine_similarity compute in float32 under CUDA autocast (Note [Autocast's
// table]); normalize follows from vector_norm's float32 norm.
Tensor vector_norm(const Tensor& x, double ord, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  ops::check_defined(x, "vector_norm");
  ops::check_floating(x, "vector_norm");
  EMBER_CHECK(!std::isnan(ord), "[vector_norm] ord must be a number, got nan");
  if (dtype) {
    EMBER_CHECK(is_floating(*dtype) && promote(x.dtype(), *dtype) == *dtype, "[vector_norm] cannot compute a ",
                x.dtype(), " tensor of shape ", shape_str(x.shape()), " in ", *dtype,
                ": dtype must be a floating dtype at least as wide as the input's");
    return vector_norm(x.to(*dtype), ord, dims, keepdim);
  }
  if (autocast::OpCast cast{"vector_norm", x}) return vector_norm(cast(x), ord, dims, keepdim);
  return VectorNorm::apply(x, ord, dims, keepdim);
}

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  ops::check_defined(x, "normalize");
  ops::check_floating(x, "normalize");
  return x / clamp_min(vector_norm(x, p, {dim}, true), eps);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  ops::check_defined(x1, "cosine_similarity", "x1");
  ops::check_defined(x2, "cosine_similarity", "x2");
  ops::check_same_device(x1, x2, "cosine_similarity");
  EMBER_CHECK(is_floating(promote(x1.dtype(), x2.dtype())), "[cosine_similarity] expects floating point tensors, got ",
              x1.dtype(), " of shape ", shape_str(x1.shape()), " and ", x2.dtype(), " of shape ", shape_str(x2.shape()));
  if (autocast::OpCast cast{"cosine_similarity", x1}) return cosine_similarity(cast(x1), cast(x2), dim, eps);
  return CosineSimilarity::apply(x1, x2, dim, eps);
}

}  // namespace ember
