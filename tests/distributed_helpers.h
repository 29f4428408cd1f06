#pragma once
// What the distributed tests share: a small classifier (its hidden block optionally
// checkpointed), a fixed global batch, and a few SGD steps on it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/ops.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "optim/sgd.h"
#include "tests/test_helpers.h"
#include "utils/checkpoint.h"

namespace ember::testutil {

struct SmallNet : nn::Module {
  nn::Linear fc1, fc2, head;
  bool checkpointed;
  SmallNet(int64_t hidden, bool checkpoint_blocks) : fc1(8, hidden), fc2(hidden, hidden), head(hidden, 3),
                                                     checkpointed(checkpoint_blocks) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("head", head);
  }
  Tensor block(const Tensor& x) { return relu(fc2(relu(fc1(x)))); }
  Tensor forward(const Tensor& x) override {
    Tensor h = checkpointed ? utils::checkpoint([this](const Tensor& in) { return block(in); }, x) : block(x);
    return head(h);
  }
};

// The same 128 examples on every rank (one seed), as inputs [128, 8] and labels [128].
struct GlobalBatch {
  Tensor x, y;
};
inline GlobalBatch global_batch() {
  manual_seed(1234);
  return {randn({128, 8}), randint(0, 3, {128})};
}

// The parameter called `name` in model.
inline Tensor parameter(const nn::Module& model, const std::string& name) {
  for (const auto& [n, p] : model.named_parameters())
    if (n == name) return p;
  ADD_FAILURE() << "no parameter " << name;
  return Tensor();
}

inline double max_abs_difference(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

// `steps` SGD steps of `model` (through `forward`, which may be the DDP wrapper) on x, y.
inline void sgd_steps(nn::Module& model, nn::Module& forward, const Tensor& x, const Tensor& y, int steps) {
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < steps; ++s) {
    sgd.zero_grad();
    cross_entropy(forward(x), y).backward();
    sgd.step();
  }
}

}  // namespace ember::testutil
