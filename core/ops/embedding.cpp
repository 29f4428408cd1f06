// Embedding lookup: a gather of table rows forward, a deterministic sum of the gradient rows of
// repeated ids backward (Note [Embedding backward] in core/cpu/embedding.cpp).
#include <optional>

#include "core/autograd/function.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

using autograd::Ctx;
using autograd::Function;
using autograd::Grads;

namespace {

// weight is contiguous [num, dim]; ids is contiguous int64 of any shape. Saves only the ids: the
// backward needs the table's shape, not its values. The padding row's gradient is zeroed after
// the kernel: its ids were looked up like any other, they only must not train their row.
struct Embedding : Function<Embedding> {
  static constexpr const char* name = "embedding";
  struct State {
    Shape weight_shape;
    std::optional<int64_t> padding_idx;  // non-negative
    autograd::SavedRef ids;              // flattened
  };
  static Tensor forward(Ctx& c, State& s, const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx) {
    s.weight_shape = weight.shape();
    s.padding_idx = padding_idx;
    Shape out_shape = ids.shape();
    out_shape.push_back(weight.size(1));
    Tensor flat = ids.view({ids.numel()});
    Tensor out = ops::empty_on(out_shape, weight.dtype(), weight.device());
    if (out.numel() > 0) kernels::embedding_forward[weight.device()](weight, flat, out.view({ids.numel(), weight.size(1)}));
    s.ids = c.save(flat);
    return out;
  }
  static Grads backward(Ctx& c, const State& s, const Tensor& g) {
    Tensor ids = c.get(s.ids);
    Tensor gw = ops::empty_on(s.weight_shape, g.dtype(), g.device());
    if (gw.numel() > 0)
      kernels::embedding_backward[g.device()](g.contiguous().view({ids.numel(), s.weight_shape[1]}), ids, gw);
    if (s.padding_idx) gw.select(0, *s.padding_idx).zero_();
    return {gw, Tensor()};
  }
};

// Ids on the host are checked here, before any kernel reads the table. Checking ids that live on
// a GPU would copy them back and wait for the device on every lookup (Note [Embedding ids on the
// device]).
void check_ids(const Tensor& ids, const Tensor& weight) {
  if (!ids.device().is_cpu()) return;
  const int64_t num = weight.size(0);
  const int64_t* p = ids.data<int64_t>();
  for (int64_t j = 0; j < ids.numel(); ++j)
    EMBER_CHECK(p[j] >= 0 && p[j] < num, "[embedding] id ", p[j], " is out of range for a table of ", num,
                " embeddings (weight shape ", shape_str(weight.shape()), ")");
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  ops::check_defined(weight, "embedding", "weight");
  ops::check_defined(indices, "embedding", "indices");
  EMBER_CHECK(weight.dim() == 2, "[embedding] weight must be a 2-D table [num_embeddings, dim], got shape ",
              shape_str(weight.shape()));
  ops::check_floating(weight, "embedding");
  EMBER_CHECK(indices.dtype() == kInt64, "[embedding] indices must be int64, got ", indices.dtype(), " of shape ",
              shape_str(indices.shape()));
  ops::check_same_device(weight, indices, "embedding");
  const int64_t num = weight.size(0);
  if (padding_idx) {
    EMBER_CHECK(*padding_idx >= -num && *padding_idx < num, "[embedding] padding_idx ", *padding_idx,
                " is out of range for a table of ", num, " embeddings (weight shape ", shape_str(weight.shape()), ")");
    if (*padding_idx < 0) padding_idx = *padding_idx + num;
  }
  Tensor ids = indices.contiguous();
  check_ids(ids, weight);
  return Embedding::apply(weight.contiguous(), ids, padding_idx);
}

}  // namespace ember
