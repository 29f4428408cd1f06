#pragma once
// nn::functional: the stateless forms of the layers (torch.nn.functional). Most are core ops,
// brought in here under their nn names; linear is defined with the Linear layer.
#include "core/ops.h"
#include "nn/linear.h"

namespace ember::nn::functional {

using ember::adaptive_avg_pool2d;
using ember::avg_pool2d;
using ember::batch_norm;
using ember::binary_cross_entropy;
using ember::binary_cross_entropy_with_logits;
using ember::conv2d;
using ember::cosine_similarity;
using ember::cross_entropy;
using ember::dropout;
using ember::embedding;
using ember::gelu;
using ember::huber_loss;
using ember::l1_loss;
using ember::layer_norm;
using ember::leaky_relu;
using ember::log_softmax;
using ember::max_pool2d;
using ember::mse_loss;
using ember::nll_loss;
using ember::normalize;
using ember::relu;
using ember::scaled_dot_product_attention;
using ember::sigmoid;
using ember::silu;
using ember::smooth_l1_loss;
using ember::softmax;
using ember::tanh;

}  // namespace ember::nn::functional
