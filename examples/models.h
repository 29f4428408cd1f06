#pragma once
// The example programs' models, shared with the tests that train them.
#include "nn/nn.h"

namespace ember::examples {

// 784-512-512-10 with ReLU and Dropout after each hidden layer.
struct MLP : nn::Module {
  explicit MLP(double dropout = 0.2);
  Tensor forward(const Tensor& x) override;

  nn::Flatten flatten;
  nn::Linear fc1{784, 512}, fc2{512, 512}, fc3{512, 10};
  nn::Dropout drop1, drop2;
};

// ResNet-20 for 1x28x28 images: a 16-channel 3x3 stem, three stages of three BasicBlocks with
// 16, 32 and 64 channels (stride 2 entering stages 2 and 3: 28 -> 14 -> 7), global average
// pooling and a 64 -> 10 classifier. `blocks` holds the nine BasicBlocks in order, so that
// checkpointing can be switched on for them (utils::checkpoint_modules<nn::BasicBlock>) or the
// stack handed to checkpoint_sequential.
struct ResNet20 : nn::Module {
  ResNet20();
  Tensor forward(const Tensor& x) override;
  // The stem and head around `blocks`, for callers that run the blocks themselves.
  Tensor stem_forward(const Tensor& x);
  Tensor head_forward(const Tensor& h);

  nn::Conv2d stem_conv;
  nn::BatchNorm2d stem_bn;
  nn::Sequential blocks;
  nn::AdaptiveAvgPool2d pool{1};
  nn::Flatten flatten;
  nn::Linear fc{64, 10};
};

}  // namespace ember::examples
