#include "examples/models.h"

namespace ember::examples {

MLP::MLP(double dropout) : drop1(dropout), drop2(dropout) {
  register_module("fc1", fc1);
  register_module("drop1", drop1);
  register_module("fc2", fc2);
  register_module("drop2", drop2);
  register_module("fc3", fc3);
}

Tensor MLP::forward(const Tensor& x) {
  Tensor h = drop1(relu(fc1(flatten(x))));
  h = drop2(relu(fc2(h)));
  return fc3(h);
}

ResNet20::ResNet20() : stem_conv(nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)), stem_bn(16) {
  int64_t channels = 16;
  for (int64_t stage_channels : {16, 32, 64})
    for (int i = 0; i < 3; ++i) {
      const int64_t stride = (i == 0 && stage_channels != 16) ? 2 : 1;
      blocks.add<nn::BasicBlock>(channels, stage_channels, stride);
      channels = stage_channels;
    }
  register_module("stem_conv", stem_conv);
  register_module("stem_bn", stem_bn);
  register_module("blocks", blocks);
  register_module("fc", fc);
  // torchvision's ResNets initialise convolutions for ReLU (fan_out) and BatchNorm to (1, 0).
  for (auto& [name, m] : named_modules())
    if (auto* conv = dynamic_cast<nn::Conv2d*>(m))
      nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::FanOut, "relu");
}

Tensor ResNet20::stem_forward(const Tensor& x) { return relu(stem_bn(stem_conv(x))); }
Tensor ResNet20::head_forward(const Tensor& h) { return fc(flatten(pool(h))); }
Tensor ResNet20::forward(const Tensor& x) { return head_forward(blocks(stem_forward(x))); }

}  // namespace ember::examples
