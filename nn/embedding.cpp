#include "nn/embedding.h"

#include "nn/init.h"

namespace ember::nn {

Embedding::Embedding(int64_t num, int64_t dim) : num_embeddings(num), embedding_dim(dim) {
  EMBER_CHECK(num > 0 && dim > 0, "[Embedding] num_embeddings and embedding_dim must be positive, got ", num, " and ",
              dim);
  weight = register_parameter("weight", empty({num, dim}));
  init::normal_(weight);
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(weight, ids); }

std::string Embedding::extra_repr() const { return detail::concat(num_embeddings, ", ", embedding_dim); }

}  // namespace ember::nn
