#pragma once
#include <memory>
#include <optional>

#include "nn/module.h"

namespace ember::nn {

// A lookup table: int64 ids of any shape -> their rows of `weight` [num_embeddings,
// embedding_dim], shape ids.shape + [embedding_dim] (embedding in core/ops.h, which refuses an id
// outside [0, num_embeddings) with its value and the table's shape). Initialised as PyTorch's:
// weight ~ N(0, 1). With padding_idx (negative counts from the end, stored counted from the
// start, as PyTorch does), that row starts as zeros and gets no gradient, so a padding id keeps
// looking up zeros while the rest train.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  // PyTorch's Embedding.from_pretrained: a table whose weight is `embeddings` [num, dim] itself
  // (its memory, not a copy: word vectors loaded once), frozen (requires_grad off) unless
  // freeze is false. A padding row keeps the values it has and, trained, gets no gradient.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                    std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& ids) override;

  const int64_t num_embeddings, embedding_dim;
  const std::optional<int64_t> padding_idx;  // in [0, num_embeddings)
  Tensor weight;

 protected:
  std::string extra_repr() const override;

 private:
  Embedding(const Tensor& pretrained, bool requires_grad, std::optional<int64_t> padding_idx);
};

}  // namespace ember::nn
