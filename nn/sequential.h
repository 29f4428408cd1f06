#pragma once
#include "nn/module_list.h"

namespace ember::nn {

// A ModuleList whose forward runs its children in order, each on the previous one's output:
//   nn::Sequential seq;
//   seq.add<nn::Linear>(784, 512);
//   seq.add<nn::ReLU>();
// Children are named "0", "1", ... and can be indexed, iterated and nested.
class Sequential : public ModuleList {
 public:
  Sequential() = default;
  Tensor forward(const Tensor& x) override;
};

}  // namespace ember::nn
