#include "nn/residual.h"

namespace ember::nn {

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride)
    : conv1(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)),
      bn1(out),
      conv2(Conv2dOptions(out, out, 3).padding(1).bias(false)),
      bn2(out) {
  register_module("conv1", conv1);
  register_module("bn1", bn1);
  register_module("conv2", conv2);
  register_module("bn2", bn2);
  if (stride != 1 || in != out) {
    shortcut.add<Conv2d>(Conv2dOptions(in, out, 1).stride(stride).bias(false));
    shortcut.add<BatchNorm2d>(out);
    register_module("shortcut", shortcut);
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor h = relu(bn1(conv1(x)));
  h = bn2(conv2(h));
  return relu(h + (has_projection() ? shortcut(x) : x));
}

}  // namespace ember::nn
