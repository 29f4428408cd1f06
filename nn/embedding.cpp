#include "nn/embedding.h"

#include "core/autograd/grad_mode.h"
#include "nn/init.h"

namespace ember::nn {

namespace {
// padding_idx counted from the start, checked against the table as PyTorch's constructor does.
std::optional<int64_t> padding_row(std::optional<int64_t> padding_idx, int64_t num) {
  if (!padding_idx) return std::nullopt;
  EMBER_CHECK(*padding_idx >= -num && *padding_idx < num, "[Embedding] padding_idx ", *padding_idx,
              " must lie in [-num_embeddings, num_embeddings) = [", -num, ", ", num, ")");
  return *padding_idx < 0 ? *padding_idx + num : *padding_idx;
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> padding)
    : num_embeddings(num), embedding_dim(dim), padding_idx(padding_row(padding, num)) {
  EMBER_CHECK(num > 0 && dim > 0, "[Embedding] num_embeddings and embedding_dim must be positive, got ", num, " and ",
              dim);
  weight = register_parameter("weight", empty({num, dim}));
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).zero_();
  }
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings, bool freeze,
                                                      std::optional<int64_t> padding_idx) {
  EMBER_CHECK(embeddings.defined() && embeddings.dim() == 2 && is_floating(embeddings.dtype()),
              "[Embedding.from_pretrained] embeddings must be a 2-D floating tensor [num_embeddings, embedding_dim], "
              "got ",
              embeddings.defined() ? detail::concat(embeddings.dtype(), " of shape ", shape_str(embeddings.shape()))
                                   : std::string("an undefined tensor"));
  EMBER_CHECK(embeddings.size(0) > 0 && embeddings.size(1) > 0, "[Embedding.from_pretrained] embeddings of shape ",
              shape_str(embeddings.shape()), " have no rows or no columns");
  return std::shared_ptr<Embedding>(new Embedding(embeddings, !freeze, padding_idx));
}

// The weight is a leaf on the given tensor's memory, as a Parameter made from it is.
Embedding::Embedding(const Tensor& pretrained, bool requires_grad, std::optional<int64_t> padding)
    : num_embeddings(pretrained.size(0)), embedding_dim(pretrained.size(1)),
      padding_idx(padding_row(padding, pretrained.size(0))) {
  weight = register_parameter("weight", pretrained.detach(), requires_grad);
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(weight, ids, padding_idx); }

std::string Embedding::extra_repr() const {
  std::string repr = detail::concat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) repr += detail::concat(", padding_idx=", *padding_idx);
  return repr;
}

}  // namespace ember::nn
