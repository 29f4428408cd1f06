#pragma once
// The model the memory tests meet the wall in: fc1 (64 -> 64), a ReLU and fc2 (64 -> 4096). On a
// batch of 256, fc1's and the ReLU's outputs are 64 KiB each and fc2's is 4 MiB, so a limit of a
// few MiB above what is live fails in fc2's forward (test_memory_limit, test_memory_history).
#include "core/ops.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ember::testutil {

struct TwoLayers : nn::Module {
  nn::Linear fc1{64, 64}, fc2{64, 4096};
  TwoLayers() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

}  // namespace ember::testutil
