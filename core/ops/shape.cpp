// View ops: new shape/strides/offset over the same storage, no copy. Each is differentiable;
// its backward maps the gradient back to the input's layout.
#include <numeric>
#include <optional>

#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace ops {

// Dims are grouped into chunks that are contiguous with each other; a view may split or merge
// dims only inside a chunk.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape) {
  Shape out(new_shape.size());
  if (numel_of(shape) == 0 || shape.empty()) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[static_cast<size_t>(d)];
    bool chunk_ends = d == 0 || (shape[static_cast<size_t>(d - 1)] != 1 &&
                                 strides[static_cast<size_t>(d - 1)] != tensor_numel * chunk_base);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[static_cast<size_t>(view_d)] == 1)) {
      out[static_cast<size_t>(view_d)] = view_numel * chunk_base;
      view_numel *= new_shape[static_cast<size_t>(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base = strides[static_cast<size_t>(d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace ops

namespace {

using ops::view_strides;

// Replaces one -1 by the size that keeps numel, checking the total.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      EMBER_CHECK(infer < 0, "[", op, "] only one dimension can be inferred, got ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(out[i] >= 0, "[", op, "] invalid shape dimension ", out[i], " in ", shape_str(shape));
      known = checked_mul(known, out[i], op, shape);
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, "[", op, "] shape ", shape_str(shape),
                " is invalid for input of shape ", shape_str(from), " (", numel, " elements)");
    out[static_cast<size_t>(infer)] = numel / known;
  }
  EMBER_CHECK(numel_of(out, op) == numel, "[", op, "] shape ", shape_str(shape), " is invalid for input of shape ",
              shape_str(from), " (", numel, " elements)");
  return out;
}

// A view that keeps row-major element order (reshape, squeeze, unsqueeze, flatten).
struct View : Function<View> {
  static constexpr const char* name = "view";
  struct State {
    Shape input_shape;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, const Shape& shape, const Shape& strides) {
    s.input_shape = x.shape();
    return make_view(x, shape, strides, x.offset());
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) { return {g.reshape(s.input_shape)}; }
};

struct Permute : Function<Permute> {
  static constexpr const char* name = "permute";
  struct State {
    Shape inverse_dims;  // the permutation that undoes dims
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, const Shape& dims) {
    Shape shape(dims.size()), strides(dims.size()), inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      shape[i] = x.shape()[static_cast<size_t>(dims[i])];
      strides[i] = x.strides()[static_cast<size_t>(dims[i])];
      inverse[static_cast<size_t>(dims[i])] = static_cast<int64_t>(i);
    }
    s.inverse_dims = inverse;
    return make_view(x, shape, strides, x.offset());
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) { return {g.permute(s.inverse_dims)}; }
};

struct Slice : Function<Slice> {
  static constexpr const char* name = "slice";
  struct State {
    Shape input_shape;
    int64_t dim, start, length, step;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, int64_t dim, int64_t start, int64_t length, int64_t step) {
    Shape shape = x.shape(), strides = x.strides();
    const auto d = static_cast<size_t>(dim);
    shape[d] = length;
    strides[d] *= step;
    s = {x.shape(), dim, start, length, step};
    return make_view(x, shape, strides, x.offset() + start * x.strides()[d]);
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) {
    Tensor gx = zeros(s.input_shape, TensorOptions(g.dtype()).with_device(g.device()));
    Tensor window = gx.slice(s.dim, s.start, s.start + s.length * s.step, s.step);
    if (g.numel() > 0) kernels::copy[g.device()](g, window);
    return {gx};
  }
};

struct Expand : Function<Expand> {
  static constexpr const char* name = "expand";
  struct State {
    Shape input_shape;
  };
  static Tensor forward(Ctx&, State& s, const Tensor& x, const Shape& shape, const Shape& strides) {
    s.input_shape = x.shape();
    return make_view(x, shape, strides, x.offset());
  }
  static Grads backward(Ctx&, const State& s, const Tensor& g) { return {sum_to(g, s.input_shape)}; }
};

Tensor view_as(const Tensor& x, const Shape& shape, const Shape& strides) {
  return View::apply(x, shape, strides);
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), "view", this->shape());
  std::optional<Shape> st = view_strides(this->shape(), strides(), target);
  EMBER_CHECK(st.has_value(), "[view] shape ", shape_str(shape), " is not compatible with the input's shape ",
              shape_str(this->shape()), " and strides ", shape_str(strides()), "; use reshape() instead");
  return view_as(*this, target, *st);
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), "reshape", this->shape());
  std::optional<Shape> st = view_strides(this->shape(), strides(), target);
  return st ? view_as(*this, target, *st) : contiguous().view(target);
}

Tensor Tensor::permute(const Shape& dims) const {
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == dim(), "[permute] got ", dims.size(), " dims ", shape_str(dims),
              " for a tensor of shape ", shape_str(shape()));
  Shape norm;
  std::vector<bool> seen(dims.size(), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, dim(), "permute");
    EMBER_CHECK(!seen[static_cast<size_t>(w)], "[permute] dim ", d, " repeats in ", shape_str(dims));
    seen[static_cast<size_t>(w)] = true;
    norm.push_back(w);
  }
  return Permute::apply(*this, norm);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const auto a = static_cast<size_t>(wrap_dim(d0, dim(), "transpose"));
  const auto b = static_cast<size_t>(wrap_dim(d1, dim(), "transpose"));
  // A 0-d tensor (whose dim 0 or -1 wrap_dim accepts) or a 1-d one is its own transpose.
  if (dim() < 2) return view_as(*this, shape(), strides());
  Shape dims(static_cast<size_t>(dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[a], dims[b]);
  return Permute::apply(*this, dims);
}

Tensor Tensor::slice(int64_t dim_, int64_t start, int64_t end, int64_t step) const {
  EMBER_CHECK(dim() > 0, "[slice] cannot slice a 0-dim tensor");
  const int64_t d = wrap_dim(dim_, dim(), "slice");
  EMBER_CHECK(step > 0, "[slice] step must be positive, got ", step);
  const int64_t n = size(d);
  auto clip = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clip(start);
  end = std::max(clip(end), start);
  // ceil((end - start) / step), written so that a huge step cannot overflow.
  const int64_t length = end == start ? 0 : (end - start - 1) / step + 1;
  // A slice of at most one element is the same for every step; step 1 keeps the view's
  // stride (stride * step) from overflowing.
  return Slice::apply(*this, d, start, length, length > 1 ? step : int64_t{1});
}

Tensor Tensor::narrow(int64_t dim_, int64_t start, int64_t length) const {
  EMBER_CHECK(dim() > 0, "[narrow] cannot narrow a 0-dim tensor");
  const int64_t d = wrap_dim(dim_, dim(), "narrow");
  if (start < 0) start += size(d);
  // length is compared with what is left after start: start + length could overflow.
  EMBER_CHECK(start >= 0 && start <= size(d) && length >= 0 && length <= size(d) - start, "[narrow] start ", start,
              " and length ", length, " are out of range for dim ", d, " of size ", size(d), " (shape ",
              shape_str(shape()), ")");
  return Slice::apply(*this, d, start, length, int64_t{1});
}

Tensor Tensor::select(int64_t dim_, int64_t index) const {
  EMBER_CHECK(dim() > 0, "[select] cannot select from a 0-dim tensor");
  const int64_t d = wrap_dim(dim_, dim(), "select");
  EMBER_CHECK(index >= -size(d) && index < size(d), "[select] index ", index, " is out of range for dim ", d,
              " of size ", size(d), " (shape ", shape_str(shape()), ")");
  if (index < 0) index += size(d);
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& shape_) const {
  EMBER_CHECK(static_cast<int64_t>(shape_.size()) >= dim(), "[expand] cannot expand shape ", shape_str(shape()),
              " to fewer dims ", shape_str(shape_));
  if (shape_ == shape()) return *this;
  const size_t lead = shape_.size() - static_cast<size_t>(dim());
  Shape out(shape_.size()), strides(shape_.size());
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i < lead) {
      EMBER_CHECK(shape_[i] >= 0, "[expand] invalid size ", shape_[i], " in ", shape_str(shape_));
      out[i] = shape_[i];
      strides[i] = 0;
      continue;
    }
    const int64_t have = shape()[i - lead], want = shape_[i] == -1 ? have : shape_[i];
    EMBER_CHECK(have == want || have == 1, "[expand] cannot expand shape ", shape_str(shape()), " to ",
                shape_str(shape_), " (dim ", i, ": ", have, " vs ", want, ")");
    out[i] = want;
    strides[i] = have == want ? this->strides()[i - lead] : 0;
  }
  numel_of(out, "expand");  // the new shape must be valid too (Note [Checked size arithmetic])
  return Expand::apply(*this, out, strides);
}

Tensor Tensor::squeeze() const {
  Shape shape_, strides_;
  for (int64_t i = 0; i < dim(); ++i)
    if (size(i) != 1) {
      shape_.push_back(size(i));
      strides_.push_back(stride(i));
    }
  return view_as(*this, shape_, strides_);
}

Tensor Tensor::squeeze(int64_t dim_) const {
  if (dim() == 0) return view_as(*this, shape(), strides());
  const auto d = static_cast<size_t>(wrap_dim(dim_, dim(), "squeeze"));
  if (shape()[d] != 1) return view_as(*this, shape(), strides());
  Shape shape_ = shape(), strides_ = strides();
  shape_.erase(shape_.begin() + static_cast<std::ptrdiff_t>(d));
  strides_.erase(strides_.begin() + static_cast<std::ptrdiff_t>(d));
  return view_as(*this, shape_, strides_);
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  const auto d = static_cast<size_t>(wrap_dim(dim_, dim() + 1, "unsqueeze"));
  Shape shape_ = shape(), strides_ = strides();
  const int64_t stride_ = d < shape_.size() ? shape_[d] * strides_[d] : 1;
  shape_.insert(shape_.begin() + static_cast<std::ptrdiff_t>(d), 1);
  strides_.insert(strides_.begin() + static_cast<std::ptrdiff_t>(d), stride_);
  return view_as(*this, shape_, strides_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  EMBER_CHECK(s <= e, "[flatten] start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape out;
  for (int64_t i = 0; i < s; ++i) out.push_back(size(i));
  int64_t merged = 1;
  for (int64_t i = s; i <= e; ++i) merged *= size(i);
  out.push_back(merged);
  for (int64_t i = e + 1; i < dim(); ++i) out.push_back(size(i));
  return reshape(out);
}

}  // namespace ember
