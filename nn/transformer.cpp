#include "nn/transformer.h"

#include "nn/activation.h"
#include "nn/dropout.h"

namespace ember::nn {

TransformerBlock::TransformerBlock(int64_t d, int64_t heads, double dropout)
    : ln1(d), attn(d, heads, dropout), ln2(d) {
  mlp.add<Linear>(d, 4 * d);
  mlp.add<GELU>();
  mlp.add<Linear>(4 * d, d);
  mlp.add<Dropout>(dropout);
  register_module("ln1", ln1);
  register_module("attn", attn);
  register_module("ln2", ln2);
  register_module("mlp", mlp);
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = x + attn(ln1(x));
  return h + mlp(ln2(h));
}

}  // namespace ember::nn
