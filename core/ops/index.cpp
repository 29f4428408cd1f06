// Indexing, joining and splitting: index_select, gather, cat, stack, split, chunk.
#include <algorithm>

#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

using ops::split_at;
using ops::Split3;

namespace {

// The State of index_select and gather: backward scatters into zeros of the input's shape along dim.
struct IndexedInput {
  Shape input_shape;
  int64_t dim;
  autograd::SavedRef index;  // contiguous
};

// Indices on the host are checked here. Indices on a GPU are checked by the kernel that reads them,
// and a bad one is raised at the next synchronisation, so that a lookup does not copy its indices
// back and wait for the device (Note [Index errors found on the device] in cuda/bad_index.h).
void check_indices(const Tensor& index, int64_t size, const char* op, const Shape& x_shape, int64_t dim) {
  EMBER_CHECK(index.dtype() == kInt64, "[", op, "] index must be int64, got ", index.dtype());
  if (!index.device().is_cpu()) return;
  for (int64_t i : index.to_vector<int64_t>())
    EMBER_CHECK(i >= 0 && i < size, "[", op, "] index ", i, " is out of range for dim ", dim, " of size ", size,
                " (input shape ", shape_str(x_shape), ")");
}

struct IndexSelect : Function<IndexSelect> {
  static constexpr const char* name = "index_select";
  using State = IndexedInput;
  static Tensor forward(Ctx& c, State& s, const Tensor& x, int64_t dim, const Tensor& index) {
    Shape out_shape = x.shape();
    out_shape[static_cast<size_t>(dim)] = index.numel();
    Split3 split = split_at(x.shape(), dim);
    Tensor out = ops::empty_on(out_shape, x.dtype(), x.device()), idx = index.contiguous();
    if (out.numel() > 0) kernels::index_select[x.device()](x.contiguous(), idx, split.outer, split.k, split.inner, out);
    s = {x.shape(), dim, c.save(idx)};
    return out;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor gx = zeros(s.input_shape, TensorOptions(g.dtype()).with_device(g.device()));
    Split3 split = split_at(s.input_shape, s.dim);
    if (g.numel() > 0)
      kernels::index_add[g.device()](g.contiguous(), c.get(s.index), split.outer, split.k, split.inner, gx);
    return {gx, Tensor()};
  }
};

struct Gather : Function<Gather> {
  static constexpr const char* name = "gather";
  using State = IndexedInput;
  static Tensor forward(Ctx& c, State& s, const Tensor& x, int64_t dim, const Tensor& index) {
    Split3 split = split_at(x.shape(), dim);
    Tensor out = ops::empty_on(index.shape(), x.dtype(), x.device()), idx = index.contiguous();
    if (out.numel() > 0) kernels::gather[x.device()](x.contiguous(), idx, split.outer, split.k, split.inner, out);
    s = {x.shape(), dim, c.save(idx)};
    return out;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor gx = zeros(s.input_shape, TensorOptions(g.dtype()).with_device(g.device()));
    Split3 split = split_at(s.input_shape, s.dim);
    if (g.numel() > 0)
      kernels::scatter_add[g.device()](g.contiguous(), c.get(s.index), split.outer, split.k, split.inner, gx);
    return {gx, Tensor()};
  }
};

struct Cat : Function<Cat> {
  static constexpr const char* name = "cat";
  struct State {
    Shape input_sizes;  // each input's size along dim: where its gradient starts and ends
    int64_t dim;
  };
  static Tensor forward(Ctx&, State& s, const std::vector<Tensor>& tensors, int64_t dim) {
    Shape out_shape = tensors[0].shape();
    out_shape[static_cast<size_t>(dim)] = 0;
    s.dim = dim;
    for (const Tensor& t : tensors) {
      out_shape[static_cast<size_t>(dim)] += t.size(dim);
      s.input_sizes.push_back(t.size(dim));
    }
    Tensor out = ops::empty_on(out_shape, tensors[0].dtype(), tensors[0].device());
    int64_t offset = 0;
    for (const Tensor& t : tensors) {
      if (t.numel() > 0) kernels::copy[t.device()](t, out.narrow(dim, offset, t.size(dim)));
      offset += t.size(dim);
    }
    return out;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Grads grads;
    int64_t offset = 0;
    for (size_t i = 0; i < s.input_sizes.size(); ++i) {
      grads.push_back(c.needs_input_grad(i) ? g.narrow(s.dim, offset, s.input_sizes[i]) : Tensor());
      offset += s.input_sizes[i];
    }
    return grads;
  }
};

// Note [Split as one node]
// Each piece as a narrow() of its own is a node whose backward builds a zero tensor of the whole
// input and writes its piece into it, and the engine then adds the pieces' input-sized gradients:
// for attention's qkv(x).chunk(3, -1), three input-sized zero fills and two input-sized sums per
// block, where one input-sized gradient is all there is. So split is one node with an output per
// piece (Note [Multi-output functions]), each piece a view of the input, and its backward writes
// each piece's gradient into its slice of one tensor, zeros only for a piece that got none.
struct Split : Function<Split> {
  static constexpr const char* name = "split";
  struct State {
    Shape input_shape, sizes;
    int64_t dim;
  };
  static std::vector<Tensor> forward(Ctx&, State& s, const Tensor& x, const Shape& sizes, int64_t dim) {
    s = {x.shape(), sizes, dim};
    std::vector<Tensor> pieces;
    int64_t offset = 0;
    for (int64_t size : sizes) {
      pieces.push_back(x.narrow(dim, offset, size));
      offset += size;
    }
    return pieces;
  }
  static Grads backward(Ctx&, const State& s, const Grads& g) {
    const Tensor& any = *std::find_if(g.begin(), g.end(), [](const Tensor& t) { return t.defined(); });
    Tensor gx = ops::empty_on(s.input_shape, any.dtype(), any.device());
    int64_t offset = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const Tensor slot = gx.narrow(s.dim, offset, s.sizes[i]);
      if (slot.numel() > 0) {
        if (g[i].defined()) kernels::copy[gx.device()](g[i], slot);
        else kernels::fill[gx.device()](slot, 0.0);
      }
      offset += s.sizes[i];
    }
    return {gx};
  }
};

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::check_defined(x, "index_select");
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  EMBER_CHECK(index.dim() <= 1, "[index_select] index must be 1-D, got shape ", shape_str(index.shape()));
  ops::check_same_device(x, index, "index_select");
  check_indices(index, x.size(d), "index_select", x.shape(), d);
  return IndexSelect::apply(x, d, index.reshape({index.numel()}));
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::check_defined(x, "gather");
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  EMBER_CHECK(index.dim() == x.dim(), "[gather] index of shape ", shape_str(index.shape()),
              " must have as many dims as the input of shape ", shape_str(x.shape()));
  for (int64_t i = 0; i < x.dim(); ++i)
    EMBER_CHECK(i == d || index.size(i) == x.size(i), "[gather] index of shape ", shape_str(index.shape()),
                " must match the input of shape ", shape_str(x.shape()), " in every dim but ", d);
  ops::check_same_device(x, index, "gather");
  check_indices(index, x.size(d), "gather", x.shape(), d);
  return Gather::apply(x, d, index);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "[cat] expects a non-empty list of tensors");
  const Tensor& first = tensors[0];
  const int64_t d = wrap_dim(dim, first.dim(), "cat");
  EMBER_CHECK(first.dim() > 0, "[cat] zero-dimensional tensors cannot be concatenated");
  DType dtype = first.dtype();  // the tensors' promoted dtype, as PyTorch's cat (int64 and float32 give float32)
  for (size_t i = 1; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.device() == first.device(), "[cat] tensor ", i, " of shape ", shape_str(t.shape()), " is on ",
                t.device(), " but tensor 0 of shape ", shape_str(first.shape()), " is on ", first.device());
    dtype = promote(dtype, t.dtype());
    bool same = t.dim() == first.dim();
    for (int64_t j = 0; same && j < t.dim(); ++j) same = j == d || t.size(j) == first.size(j);
    EMBER_CHECK(same, "[cat] tensor ", i, " of shape ", shape_str(t.shape()), " does not match tensor 0 of shape ",
                shape_str(first.shape()), " outside dim ", d);
  }
  std::optional<int64_t> total = 0;  // the output's size along d (Note [Checked size arithmetic])
  for (const Tensor& t : tensors) {
    total = try_add(*total, t.size(d));
    EMBER_CHECK(total.has_value(), "[cat] the sizes along dim ", d, " of the ", tensors.size(),
                " tensors (tensor 0 of shape ", shape_str(first.shape()), ") add up to more than int64 holds");
  }
  for (const Tensor& t : tensors)
    if (t.dtype() != dtype) {
      std::vector<Tensor> promoted;
      for (const Tensor& u : tensors) promoted.push_back(u.to(dtype));  // a cast carries the gradient back
      return Cat::apply(promoted, d);
    }
  return Cat::apply(tensors, d);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "[stack] expects a non-empty list of tensors");
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].shape() == tensors[0].shape(), "[stack] tensor ", i, " of shape ",
                shape_str(tensors[i].shape()), " differs from tensor 0 of shape ", shape_str(tensors[0].shape()));
    expanded.push_back(tensors[i].unsqueeze(d));
  }
  return cat(expanded, d);
}

std::vector<Tensor> split(const Tensor& x, const Shape& sizes, int64_t dim) {
  ops::check_defined(x, "split");
  EMBER_CHECK(x.dim() > 0, "[split] cannot split a 0-dim tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t size : sizes) {
    EMBER_CHECK(size >= 0, "[split] sizes ", shape_str(sizes), " must not be negative");
    const std::optional<int64_t> sum = try_add(total, size);
    EMBER_CHECK(sum, "[split] sizes ", shape_str(sizes), " add up to more than int64 holds; dim ", d,
                " of the input of shape ", shape_str(x.shape()), " has size ", x.size(d));
    total = *sum;
  }
  EMBER_CHECK(total == x.size(d), "[split] sizes ", shape_str(sizes), " add up to ", total, " but dim ", d,
              " of the input of shape ", shape_str(x.shape()), " has size ", x.size(d));
  return Split::apply(x, sizes, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  ops::check_defined(x, "split");
  EMBER_CHECK(x.dim() > 0, "[split] cannot split a 0-dim tensor");
  EMBER_CHECK(split_size > 0, "[split] split_size must be > 0, got ", split_size);
  const int64_t n = x.size(wrap_dim(dim, x.dim(), "split"));
  Shape sizes(static_cast<size_t>(n / split_size), split_size);
  if (n % split_size != 0 || n == 0) sizes.push_back(n % split_size);  // the short last piece
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  ops::check_defined(x, "chunk");
  EMBER_CHECK(x.dim() > 0, "[chunk] cannot chunk a 0-dim tensor");
  EMBER_CHECK(chunks > 0, "[chunk] chunks must be > 0, got ", chunks);
  const int64_t n = x.size(wrap_dim(dim, x.dim(), "chunk"));
  return split(x, std::max<int64_t>((n + chunks - 1) / chunks, 1), dim);
}

}  // namespace ember
