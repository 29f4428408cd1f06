#pragma once
#include "nn/module.h"

namespace ember::nn {

// A lookup table: int64 ids of any shape -> their rows of `weight` [num_embeddings,
// embedding_dim], shape ids.shape + [embedding_dim] (embedding in core/ops.h, which refuses an id
// outside [0, num_embeddings) with its value and the table's shape). Initialised as PyTorch's:
// weight ~ N(0, 1).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& ids) override;

  const int64_t num_embeddings, embedding_dim;
  Tensor weight;

 protected:
  std::string extra_repr() const override;
};

}  // namespace ember::nn
