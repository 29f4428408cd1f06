// Reductions (sum, mean, max, min, argmax, var, stddev) and softmax/log_softmax.
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/autocast.h"
#include "core/autograd/engine.h"
#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;
using kernels::ReduceOp;

namespace ops {
// The reduction dims and shapes of helpers.h.
Shape normalize_dims(const Shape& dims, int64_t ndim, const char* op) {
  Shape out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  if (dims.empty())
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
  std::sort(out.begin(), out.end());
  EMBER_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "[", op, "] dim ",
              shape_str(dims), " names a dim more than once");
  // A 0-d tensor has no dim to index: dim 0 or -1 (which wrap_dim accepts, as PyTorch does) names
  // the tensor itself, so it reduces over nothing.
  if (ndim == 0) out.clear();
  return out;
}

Shape keepdim_shape(const Shape& shape, const Shape& dims) {
  Shape out = shape;
  for (int64_t d : dims) out[static_cast<size_t>(d)] = 1;
  return out;
}

Shape squeezed_shape(const Shape& shape, const Shape& dims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(d))) out.push_back(shape[d]);
  return out;
}

Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, const kernels::SoftmaxSpec& spec,
                        bool overwrite_g) {
  if (y.dim() == 0) return softmax_backward(y.reshape({1}), g.reshape({1}), 0, spec).reshape({});
  const int64_t last = y.dim() - 1;
  if (overwrite_g && dim == last && g.shape() == y.shape() && g.dtype() == y.dtype() && g.is_contiguous()) {
    if (g.numel() > 0) kernels::softmax_backward[y.device()](y.contiguous(), g, g, spec);
    return g;
  }
  const Tensor rows_y = y.transpose(dim, last).contiguous(), rows_g = g.transpose(dim, last).contiguous();
  Tensor gx = empty_on(rows_y.shape(), rows_y.dtype(), rows_y.device());
  if (gx.numel() > 0) kernels::softmax_backward[y.device()](rows_y, rows_g, gx, spec);
  return gx.transpose(dim, last);
}
}  // namespace ops

namespace {

using ops::keepdim_shape;
using ops::normalize_dims;
using ops::squeezed_shape;

// Reduces `dims` of x (result in keepdim shape). Each run of adjacent dims is one kernel pass
// over x viewed as [outer, k, inner]; mean of equal-sized means is the mean, so Mean composes.
Tensor reduce_dims(ReduceOp op, const Tensor& x, const Shape& dims, const char* name) {
  Tensor cur = x.contiguous();
  for (size_t r = dims.size(); r > 0;) {
    size_t first = r - 1;
    while (first > 0 && dims[first - 1] == dims[first] - 1) --first;
    const int64_t lo = dims[first], hi = dims[r - 1];
    const Shape& s = cur.shape();
    int64_t outer = 1, k = 1, inner = 1;
    for (int64_t d = 0; d < cur.dim(); ++d) (d < lo ? outer : d <= hi ? k : inner) *= s[static_cast<size_t>(d)];
    EMBER_CHECK(k > 0 || op == ReduceOp::Sum || op == ReduceOp::Mean, "[", name,
                "] cannot reduce over an empty dim of a tensor of shape ", shape_str(x.shape()));
    Shape out_shape = s;
    for (int64_t d = lo; d <= hi; ++d) out_shape[static_cast<size_t>(d)] = 1;
    Tensor out = ops::empty_on(out_shape, cur.dtype(), cur.device());
    if (out.numel() > 0) {
      if (k == 0) kernels::fill[out.device()](out, op == ReduceOp::Mean ? NAN : 0.0);
      else kernels::reduce[cur.device()](op, cur, outer, k, inner, out);
    }
    cur = out;
    r = first;
  }
  return cur;
}

int64_t count_of(const Shape& shape, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[static_cast<size_t>(d)];
  return n;
}

template <ReduceOp Op>
struct Reduce : Function<Reduce<Op>> {
  static constexpr const char* name = Op == ReduceOp::Sum ? "sum" : Op == ReduceOp::Mean ? "mean"
                                      : Op == ReduceOp::Max ? "max" : "min";
  struct State {
    Shape input_shape;
    Shape dims;  // the reduced dims, sorted and non-negative
    autograd::SavedRef input, extremum;  // max and min only
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Shape& dims, bool keepdim) {
    Shape norm = normalize_dims(dims, x.dim(), name);
    if constexpr (Op == ReduceOp::Max || Op == ReduceOp::Min)
      EMBER_CHECK(x.numel() > 0, "[", name, "] cannot reduce an empty tensor of shape ", shape_str(x.shape()));
    Tensor y = reduce_dims(Op, x, norm, name);
    s = {x.shape(), norm, {}, {}};
    if constexpr (Op == ReduceOp::Max || Op == ReduceOp::Min) {
      s.input = c.save(x);
      s.extremum = c.save(y);
    }
    return keepdim ? y : y.view(squeezed_shape(x.shape(), norm));
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    const Shape &in_shape = s.input_shape, &dims = s.dims;
    Tensor gk = g.reshape(keepdim_shape(in_shape, dims));
    if constexpr (Op == ReduceOp::Sum) return {gk.expand(in_shape)};
    if constexpr (Op == ReduceOp::Mean) return {(gk / static_cast<double>(count_of(in_shape, dims))).expand(in_shape)};
    // max/min: split the gradient evenly between the elements equal to the extremum; a NaN
    // extremum came from the NaNs of its row, which share it (x != x only for a NaN), as PyTorch's
    const Tensor input = c.get(s.input), extremum = c.get(s.extremum);
    Tensor mask = (input == extremum).to(g.dtype());
    if (is_floating(input.dtype())) mask = mask + (input != input).to(g.dtype()) * (extremum != extremum).to(g.dtype());
    Tensor ties = reduce_dims(ReduceOp::Sum, mask, dims, name);
    return {mask * (gk / ties)};
  }
};

// sum((x - mean)^2) / divisor over dims, divisor = max(N - correction, 0) for N reduced elements.
// Saves x and its mean (small: the keepdim shape), not the centred copy of x; the backward is
// 2 (x - mean) / divisor times the gradient (the mean's own dependence on x cancels because the
// centred values sum to zero).
// With Sqrt it is the standard deviation s = sqrt(var), whose gradient g / (2 s) passes through
// var's. Where s = 0 (every element the same) that is 0 / 0, and PyTorch gives 0, the gradient of
// least norm at sqrt's kink; so does ember, rather than NaN for a constant row.
template <bool Sqrt>
struct Var : Function<Var<Sqrt>> {
  static constexpr const char* name = Sqrt ? "stddev" : "var";
  struct State {
    Shape input_shape;
    Shape dims;  // the reduced dims, sorted and non-negative
    double divisor;
    autograd::SavedRef input, mean;  // mean: in the keepdim shape
    std::optional<autograd::SavedRef> result;  // the standard deviation (Sqrt), in the keepdim shape
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
    Shape norm = normalize_dims(dims, x.dim(), name);
    const auto count = static_cast<double>(count_of(x.shape(), norm));
    s = {x.shape(), norm, std::max(count - static_cast<double>(correction), 0.0), {}, {}, {}};
    Tensor mu = reduce_dims(ReduceOp::Mean, x, norm, name);
    Tensor centred = x - mu;
    Tensor v = reduce_dims(ReduceOp::Sum, centred * centred, norm, name) / s.divisor;
    s.input = c.save(x);
    s.mean = c.save(mu);
    if constexpr (Sqrt) {
      v = sqrt(v);
      s.result = c.save(v);
    }
    return keepdim ? v : v.view(squeezed_shape(x.shape(), norm));
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor gk = g.reshape(keepdim_shape(s.input_shape, s.dims));
    if constexpr (Sqrt) {
      const Tensor result = c.get(*s.result);
      gk = where(result == 0.0, ops::wrap_scalar(0.0, gk), gk / (2.0 * result));
    }
    return {gk * (c.get(s.input) - c.get(s.mean)) * (2.0 / s.divisor)};
  }
};

template <bool Log>
struct Softmax : Function<Softmax<Log>> {
  static constexpr const char* name = Log ? "log_softmax" : "softmax";
  struct State {
    int64_t dim;  // wrapped: non-negative
    autograd::SavedRef output;
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& x, int64_t dim) {
    ops::check_floating(x, name);
    const int64_t d = wrap_dim(dim, x.dim(), name);
    s.dim = d;
    const int64_t last = std::max<int64_t>(x.dim() - 1, 0);
    Tensor in = x.dim() == 0 ? x.reshape({1}) : x.transpose(d, last).contiguous();
    Tensor y = ops::empty_on(in.shape(), in.dtype(), in.device());
    if (y.numel() > 0) kernels::softmax[x.device()](in, y, {.log = Log});
    y = x.dim() == 0 ? y.reshape({}) : y.transpose(d, last).contiguous();
    s.output = c.save(y);
    return y;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    return {ops::softmax_backward(c.get(s.output), g, s.dim, {.log = Log}, autograd::gradient_is_reusable(g))};
  }
};

}  // namespace

// Integral sums accumulate in int64, as PyTorch's: a count of uint8 mask elements must not wrap
// at 256.
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  ops::check_defined(x, "sum");
  if (autocast::OpCast cast{"sum", x}) return sum(cast(x), dims, keepdim);  // float32 on CUDA
  return Reduce<ReduceOp::Sum>::apply(is_floating(x.dtype()) ? x : x.to(kInt64), dims, keepdim);
}
Tensor sum(const Tensor& x) { return sum(x, {}, false); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  ops::check_floating(x, "mean");
  return Reduce<ReduceOp::Mean>::apply(x, dims, keepdim);
}
Tensor mean(const Tensor& x) { return mean(x, {}, false); }
Tensor max(const Tensor& x, const Shape& dims, bool keepdim) { return Reduce<ReduceOp::Max>::apply(x, dims, keepdim); }
Tensor max(const Tensor& x) { return max(x, {}, false); }
Tensor min(const Tensor& x, const Shape& dims, bool keepdim) { return Reduce<ReduceOp::Min>::apply(x, dims, keepdim); }
Tensor min(const Tensor& x) { return min(x, {}, false); }

namespace {
// var's and stddev's tensor and correction, checked under the name of the op the caller called;
// the dims are checked by Var itself, under the same name.
void check_var_arguments(const Tensor& x, int64_t correction, const char* op) {
  ops::check_defined(x, op);
  ops::check_floating(x, op);
  EMBER_CHECK(correction >= 0, "[", op, "] correction must be >= 0, got ", correction);
}
}  // namespace

// A 16-bit x computes in float32 and rounds the result once, as PyTorch's: its squares and their
// sum would overflow float16 (the variance of 0..99 is 842, its sum of squares 83325).
Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  check_var_arguments(x, correction, "var");
  if (is_sixteen_bit(x.dtype())) return var(x.to(kFloat32), dims, correction, keepdim).to(x.dtype());
  return Var<false>::apply(x, dims, correction, keepdim);
}
Tensor stddev(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  check_var_arguments(x, correction, "stddev");
  if (is_sixteen_bit(x.dtype())) return stddev(x.to(kFloat32), dims, correction, keepdim).to(x.dtype());
  return Var<true>::apply(x, dims, correction, keepdim);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = wrap_dim(dim, x.dim(), "argmax");
  EMBER_CHECK(x.numel() > 0, "[argmax] cannot reduce an empty tensor of shape ", shape_str(x.shape()));
  Tensor in = x.contiguous();
  int64_t outer = 1, k = x.dim() == 0 ? 1 : x.size(d), inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < d) outer *= x.size(i);
    if (i > d) inner *= x.size(i);
  }
  Shape kept = keepdim_shape(x.shape(), x.dim() == 0 ? Shape{} : Shape{d});
  Tensor out = ops::empty_on(kept, kInt64, x.device());
  kernels::argmax[x.device()](in, outer, k, inner, out);
  return keepdim || x.dim() == 0 ? out : out.squeeze(d);
}

// Both compute in float32 under CUDA autocast (Note [Autocast's table]).
Tensor softmax(const Tensor& x, int64_t dim) {
  if (autocast::OpCast cast{"softmax", x}) return softmax(cast(x), dim);
  return Softmax<false>::apply(x, dim);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (autocast::OpCast cast{"log_softmax", x}) return log_softmax(cast(x), dim);
  return Softmax<true>::apply(x, dim);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  EMBER_CHECK(lead >= 0, "[sum_to] cannot sum a tensor of shape ", shape_str(x.shape()), " to ", shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else {
      int64_t target = shape[static_cast<size_t>(d - lead)];
      EMBER_CHECK(target == x.size(d) || target == 1, "[sum_to] cannot sum a tensor of shape ", shape_str(x.shape()),
                  " to ", shape_str(shape));
      if (target == 1 && x.size(d) != 1) dims.push_back(d);
    }
  }
  return dims.empty() ? x.reshape(shape) : sum(x, dims, true).reshape(shape);
}

Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }

}  // namespace ember
