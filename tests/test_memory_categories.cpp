// Memory by category (Note [Memory by category] in core/memory_category.h): what each tagging
// point counts, the categories summing to live_bytes at every moment of a training step, tensors
// saved for backward by the top-level module that saved them, and OutOfMemoryError's categories
// and advice.
#include <gtest/gtest.h>

#include <string>

#include "core/allocator.h"
#include "core/memory_category.h"
#include "core/memory_limit.h"
#include "core/ops.h"
#include "core/out_of_memory.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "test_helpers.h"

using namespace ember;

namespace {

// Category bytes now minus at `before`.
int64_t grown(MemoryCategory c, const memory::LiveByCategory& before) {
  return memory::live_by_category()[c] - before[c];
}

int64_t bytes_of(const std::vector<Tensor>& tensors) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += static_cast<int64_t>(t.nbytes());
  return total;
}

int64_t saved_by(const std::string& module) {
  for (const auto& [name, bytes] : memory::live_by_category().saved_by_module)
    if (name == module) return bytes;
  return 0;
}

void expect_categories_sum_to_live() { EXPECT_EQ(memory::live_by_category().total(), memory::stats().live_bytes); }

struct Mlp {
  nn::Sequential seq;
  Mlp() {
    seq.add<nn::Linear>(32, 64);
    seq.add<nn::ReLU>();
    seq.add<nn::Linear>(64, 8);
  }
};

TEST(MemoryCategories, ATrainingStepCountsEachRoleAndSumsToLive) {
  const memory::LiveByCategory start = memory::live_by_category();
  expect_categories_sum_to_live();
  Mlp mlp;
  const std::vector<Tensor> params = mlp.seq.parameters();
  EXPECT_EQ(grown(MemoryCategory::Parameters, start), bytes_of(params));
  optim::Adam adam(params, optim::AdamOptions(1e-3));

  const Tensor x = randn({16, 32});
  Tensor loss = sum(mlp.seq(x));
  expect_categories_sum_to_live();
  // The first Linear saves the input x (made outside any module, so Other until saved) and its
  // weight (a parameter, which stays one); the ReLU its output; the second Linear its input,
  // which is the ReLU's output, already saved.
  EXPECT_EQ(saved_by("0"), static_cast<int64_t>(x.nbytes()));
  EXPECT_EQ(saved_by("1"), 16 * 64 * 4);
  EXPECT_EQ(saved_by("2"), 0);
  EXPECT_EQ(grown(MemoryCategory::Parameters, start), bytes_of(params));

  loss.backward();
  expect_categories_sum_to_live();
  EXPECT_EQ(grown(MemoryCategory::Gradients, start), bytes_of(params));
  loss = Tensor();  // the graph goes, and what it saved with it; x stays, counted as saved
  EXPECT_EQ(saved_by("1"), 0);
  EXPECT_EQ(saved_by("0"), static_cast<int64_t>(x.nbytes()));

  EXPECT_EQ(grown(MemoryCategory::OptimizerState, start), 0);
  adam.step();
  expect_categories_sum_to_live();
  EXPECT_EQ(grown(MemoryCategory::OptimizerState, start), adam.full_state_bytes(kCPU));
  EXPECT_EQ(adam.full_state_bytes(kCPU), 2 * bytes_of(params) + 4 * 8);  // two moments, four step counters

  adam.zero_grad();  // to none: the gradients go
  EXPECT_EQ(grown(MemoryCategory::Gradients, start), 0);
  expect_categories_sum_to_live();
}

TEST(MemoryCategories, FullStateBytesFollowTheHyperParameters) {
  const Tensor w = randn({10, 10}).requires_grad_();
  const Tensor frozen = randn({7});  // no gradient, no state
  EXPECT_EQ(optim::SGD({w, frozen}, optim::SGDOptions(0.1)).full_state_bytes(kCPU), 0);
  EXPECT_EQ(optim::SGD({w, frozen}, optim::SGDOptions(0.1).momentum(0.9)).full_state_bytes(kCPU), 400);
  EXPECT_EQ(optim::Adam({w}, optim::AdamOptions(1e-3).amsgrad(true)).full_state_bytes(kCPU), 3 * 400 + 8);
}

TEST(MemoryCategories, ModuleToRetagsTheNewMemory) {
  const memory::LiveByCategory start = memory::live_by_category();
  nn::Linear fc(16, 16);
  const int64_t float32_bytes = bytes_of(fc.parameters());
  fc.to(kFloat64);
  EXPECT_EQ(grown(MemoryCategory::Parameters, start), 2 * float32_bytes);
  expect_categories_sum_to_live();
}

TEST(MemoryCategories, OpsOutsideModulesHaveTheirOwner) {
  const Tensor w = randn({64, 64}).requires_grad_();
  const Tensor x = randn({64, 64});
  const Tensor y = relu(matmul(x, w));  // outside any module: the relu's output is saved there
  EXPECT_GE(saved_by("(outside modules)"), static_cast<int64_t>(y.nbytes()));
}

TEST(MemoryCategories, TheOutOfMemoryErrorSaysWhatTheMemoryHoldsAndTheAdvice) {
  Mlp mlp;
  const Tensor x = randn({16, 32});
  Tensor loss = sum(mlp.seq(x));
  memory::empty_cache();
  memory::set_limit(kCPU, memory::stats().live_bytes + 1024);
  memory::set_out_of_memory_advice(kCPU, "try --checkpoint auto");
  try {
    Tensor big = zeros({1 << 20});
    ADD_FAILURE() << "a 4 MiB tensor fit under a limit 1 KiB above what was live";
  } catch (const OutOfMemoryError& e) {
    const OutOfMemoryError::Facts& f = e.facts();
    EXPECT_EQ(f.held.total(), f.live_bytes);
    EXPECT_EQ(f.held[MemoryCategory::Parameters], memory::live_by_category()[MemoryCategory::Parameters]);
    EXPECT_GE(f.held[MemoryCategory::SavedForBackward], static_cast<int64_t>(x.nbytes()));
    EXPECT_EQ(f.advice, "try --checkpoint auto");
    const std::string message = e.what();
    EXPECT_NE(message.find("live: parameters "), std::string::npos) << message;
    EXPECT_NE(message.find("saved for backward "), std::string::npos) << message;
    EXPECT_NE(message.find("\n  try --checkpoint auto"), std::string::npos) << message;
  }
  memory::set_out_of_memory_advice(kCPU, "");
  memory::clear_limit(kCPU);
  EXPECT_EQ(memory::out_of_memory_advice(kCPU), "");
}

}  // namespace
