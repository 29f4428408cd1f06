#include "examples/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/autograd/grad_mode.h"

namespace ember::examples {

GPT::GPT(const GPTConfig& c)
    : config(c), tok_emb(c.vocab_size, c.embed_dim), pos_emb(c.context, c.embed_dim), drop(c.dropout),
      ln_f(c.embed_dim), lm_head(c.embed_dim, c.vocab_size, /*bias=*/false) {
  EMBER_CHECK(c.num_layers >= 1, "[GPT] num_layers must be at least 1, got ", c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) blocks.add<nn::TransformerBlock>(c.embed_dim, c.num_heads, c.dropout);
  register_module("tok_emb", tok_emb);
  register_module("pos_emb", pos_emb);
  register_module("drop", drop);
  register_module("blocks", blocks);
  register_module("ln_f", ln_f);
  register_module("lm_head", lm_head);
  // Note [A small GPT]: GPT-2's initialisation.
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.num_layers));
  for (auto& [name, m] : named_modules()) {
    if (auto* linear = dynamic_cast<nn::Linear*>(m)) {
      const bool writes_residual = name.ends_with("attn.out_proj") || name.ends_with("mlp.2");
      nn::init::normal_(linear->weight, 0.0, writes_residual ? residual_std : 0.02);
      if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    } else if (auto* table = dynamic_cast<nn::Embedding*>(m)) {
      nn::init::normal_(table->weight, 0.0, 0.02);
    }
  }
}

Tensor GPT::stem_forward(const Tensor& ids) {
  EMBER_CHECK(ids.defined() && ids.dim() == 2, "[GPT] expected token ids [batch, seq], got shape ",
              ids.defined() ? shape_str(ids.shape()) : "undefined");
  const int64_t seq = ids.size(1);
  EMBER_CHECK(seq <= config.context, "[GPT] a sequence of ", seq, " tokens is longer than the position table (context ",
              config.context, ")");
  Tensor positions = arange(0, static_cast<double>(seq), 1.0, TensorOptions(kInt64).with_device(ids.device()));
  return drop(tok_emb(ids) + pos_emb(positions));
}

Tensor GPT::head_forward(const Tensor& h) { return lm_head(ln_f(h)); }

Tensor GPT::forward(const Tensor& ids) {
  Tensor h = stem_forward(ids);
  for (nn::Module& block : blocks) h = block(h);
  return head_forward(h);
}

std::vector<optim::AdamWParamGroup> gpt_param_groups(nn::Module& model, const optim::AdamWOptions& options) {
  std::set<const TensorImpl*> matmul_weights;
  for (auto& [name, m] : model.named_modules())
    if (auto* linear = dynamic_cast<nn::Linear*>(m)) matmul_weights.insert(linear->weight.impl());
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : model.parameters()) (matmul_weights.count(p.impl()) ? decay : no_decay).push_back(p);
  return {{decay, options}, {no_decay, optim::AdamWOptions(options).weight_decay(0.0)}};
}

std::vector<int64_t> generate(GPT& model, std::vector<int64_t> ids, int64_t length, double temperature,
                              int64_t top_k) {
  EMBER_CHECK(!ids.empty(), "[generate] the prompt is empty");
  EMBER_CHECK(std::isfinite(temperature) && temperature > 0, "[generate] temperature must be finite and > 0, got ",
              temperature);
  EMBER_CHECK(top_k >= 0, "[generate] top_k must be >= 0, got ", top_k);
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const Device device = model.lm_head.weight.device();
  for (int64_t step = 0; step < length; ++step) {
    const auto n = static_cast<int64_t>(std::min<size_t>(ids.size(), static_cast<size_t>(model.config.context)));
    std::vector<int64_t> window(ids.end() - n, ids.end());
    Tensor input = from_vector<int64_t>(window, {1, n}, TensorOptions(kInt64)).to(device);
    std::vector<double> logits = model(input).select(1, n - 1).select(0, 0).to_vector<double>();
    // Keep the top_k largest logits; softmax over them at the temperature.
    std::vector<size_t> order(logits.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const size_t keep = top_k > 0 ? std::min(order.size(), static_cast<size_t>(top_k)) : order.size();
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](size_t a, size_t b) { return logits[a] > logits[b]; });
    std::vector<double> weights(keep);
    for (size_t i = 0; i < keep; ++i) weights[i] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    double u = rand({1}, TensorOptions(kFloat64)).item() * total;
    size_t pick = 0;
    while (pick + 1 < keep && u >= weights[pick]) u -= weights[pick++];
    ids.push_back(static_cast<int64_t>(order[pick]));
  }
  model.train(was_training);
  return ids;
}

}  // namespace ember::examples
