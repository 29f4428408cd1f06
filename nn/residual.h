#pragma once
#include "nn/batch_norm.h"
#include "nn/conv.h"
#include "nn/sequential.h"

namespace ember::nn {

// The ResNet basic block: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), 3x3 convolutions
// without bias. The shortcut is the identity when shapes agree, else a strided 1x1 convolution
// followed by BatchNorm (the "projection" shortcut).
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;
  bool has_projection() const { return shortcut.size() > 0; }

  Conv2d conv1;
  BatchNorm2d bn1;
  Conv2d conv2;
  BatchNorm2d bn2;
  Sequential shortcut;  // empty for the identity
};

}  // namespace ember::nn
