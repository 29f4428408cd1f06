// Memory statistics come from the allocator and are exact: these tests predict them to the byte.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "core/generator.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using ember::testutil::values;

namespace {
int64_t live() { return memory::stats(kCPU).live_bytes; }
}  // namespace

TEST(Memory, LiveBytesAreExact) {
  const int64_t base = live();
  {
    Tensor a = zeros({100});            // 400 bytes
    Tensor b = zeros({10}, kInt64);     // 80
    Tensor c = zeros({3, 5}, kFloat64); // 120
    Tensor d = zeros({7}, kUInt8);      // 7
    EXPECT_EQ(live(), base + 400 + 80 + 120 + 7);
    Tensor v = a.reshape({10, 10}).t().narrow(0, 2, 3);  // views allocate nothing
    EXPECT_EQ(live(), base + 607);
    EXPECT_EQ(memory::stats(kCPU).live_count >= 4, true);
  }
  EXPECT_EQ(live(), base);
}

TEST(Memory, PeakAndReset) {
  const int64_t base = live();
  memory::reset_peak();
  EXPECT_EQ(memory::stats().peak_bytes, base);
  { Tensor big = empty({1000}); }
  EXPECT_EQ(memory::stats().peak_bytes, base + 4000);
  EXPECT_EQ(live(), base);
  memory::reset_peak();
  EXPECT_EQ(memory::stats().peak_bytes, base);
}

TEST(Memory, FreedBlocksAreReusedFromTheCache) {
  { Tensor warm = empty({12345}); }
  MemoryStats before = memory::stats();
  { Tensor again = empty({12345}); }
  MemoryStats after = memory::stats();
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_EQ(after.alloc_count, before.alloc_count + 1);
  memory::empty_cache();
  EXPECT_LT(memory::stats().reserved_bytes, after.reserved_bytes);
  EXPECT_GE(memory::stats().reserved_bytes, live());
  EXPECT_NE(memory::summary().find("live"), std::string::npos);
  EXPECT_EQ(memory::format_bytes(1536), "1.50 KiB");
}

TEST(Memory, SizeClassesAndTheReuseRule) {
  EXPECT_EQ(Allocator::size_class(1), 512u);
  EXPECT_EQ(Allocator::size_class(512), 512u);
  EXPECT_EQ(Allocator::size_class(513), 1024u);
  EXPECT_EQ(Allocator::size_class((4u << 20) - 1), 4u << 20);              // the last 512-byte step
  EXPECT_EQ(Allocator::size_class((4u << 20) + 1), (4u << 20) + (64u << 10));  // then 64 KiB steps
  EXPECT_TRUE(Allocator::reuses(1024, 1024));
  EXPECT_TRUE(Allocator::reuses(9 << 20, 8 << 20));   // an eighth larger
  EXPECT_TRUE(Allocator::reuses(16 << 20, 8 << 20));  // twice the request
  EXPECT_FALSE(Allocator::reuses((16 << 20) + 512, 8 << 20));
  EXPECT_FALSE(Allocator::reuses(1024, 1536));  // too small
  EXPECT_FALSE(Allocator::reuses(1536, 512));   // three times the request
}

TEST(Memory, SlightlySmallerRequestsReuseACachedBlock) {
  memory::empty_cache();  // no block of another test in the way
  Allocator& cpu = allocator_for(kCPU);
  const size_t big = 3'000'000, smaller = 2'800'000;  // 7% apart: other size classes, one block
  cpu.deallocate(cpu.allocate(big), big);
  const MemoryStats before = memory::stats();
  const int64_t live_before = live();
  void* p = cpu.allocate(smaller);
  EXPECT_EQ(memory::stats().cache_hits, before.cache_hits + 1);
  EXPECT_EQ(memory::stats().system_allocs, before.system_allocs);
  EXPECT_EQ(live(), live_before + 2'800'000);  // requested bytes, not the block's
  EXPECT_EQ(memory::stats().reserved_bytes, before.reserved_bytes);
  cpu.deallocate(p, smaller);
  // Freed under the block's own class: the full size is served from it again.
  p = cpu.allocate(big);
  EXPECT_EQ(memory::stats().cache_hits, before.cache_hits + 2);
  cpu.deallocate(p, big);
  // Half the block's size is served by it; a third is not: that would waste two thirds of it.
  p = cpu.allocate(big / 2);
  EXPECT_EQ(memory::stats().cache_hits, before.cache_hits + 3);
  cpu.deallocate(p, big / 2);
  p = cpu.allocate(big / 3);
  EXPECT_EQ(memory::stats().system_allocs, before.system_allocs + 1);
  cpu.deallocate(p, big / 3);
  EXPECT_EQ(live(), live_before);
  memory::empty_cache();
  EXPECT_EQ(memory::stats().reserved_bytes, before.reserved_bytes - static_cast<int64_t>(Allocator::size_class(big)));
}

TEST(Memory, AfterBackwardOnlyParametersGradientsAndInputsRemain) {
  const int64_t base = live();
  {
    manual_seed(1);
    Tensor w1 = randn({20, 16}).requires_grad_(), b1 = zeros({16}).requires_grad_();
    Tensor w2 = randn({16, 5}).requires_grad_(), b2 = zeros({5}).requires_grad_();
    Tensor x = randn({8, 20});
    Tensor target = randint(0, 5, {8});
    const int64_t params = (20 * 16 + 16 + 16 * 5 + 5) * 4, inputs = 8 * 20 * 4 + 8 * 8;
    EXPECT_EQ(live(), base + params + inputs);

    Tensor loss = cross_entropy(matmul(relu(matmul(x, w1) + b1), w2) + b2, target);
    const int64_t after_forward = live();
    // Alive for backward: relu's output [8,16] (saved by the second matmul, and by relu itself:
    // one storage), the logits [8,5] and logsumexp [8] (saved by cross_entropy), and the loss.
    // x @ w1, the bias adds' inputs and the per-sample losses were temporaries of the expression,
    // freed at its end, since no backward formula saved them.
    EXPECT_EQ(after_forward, base + params + inputs + 8 * 16 * 4 + 8 * 5 * 4 + 8 * 4 + 4);

    memory::reset_peak();
    loss.backward();
    // Saved tensors were released node by node: what is left is parameters, their gradients,
    // the inputs and the loss itself (one float). The graph's nodes still exist (loss holds
    // them) but hold no tensor memory.
    EXPECT_EQ(live(), base + 2 * params + inputs + 4);
    EXPECT_TRUE(w1.grad().defined() && b2.grad().defined());
  }
  EXPECT_EQ(live(), base);
}

// An activation's backward makes the input's gradient and nothing else (Note [Activation
// backwards in one pass]): no mask, no converted copy of one, no f'(x) temporary.
TEST(Memory, ActivationBackwardAllocatesOnlyTheGradient) {
  const std::pair<const char*, Tensor (*)(const Tensor&)> activations[] = {
      {"relu", &relu},         {"sigmoid", &sigmoid}, {"tanh", &ember::tanh},
      {"gelu", &gelu},         {"silu", &silu},       {"gelu (tanh)", &testutil::gelu_tanh}};
  for (const auto& [name, f] : activations) {
    SCOPED_TRACE(name);
    manual_seed(2);
    Tensor x = randn({1024}).requires_grad_();
    Tensor y = f(x);
    Tensor seed = randn({1024});
    const int64_t before = live();
    memory::reset_peak();
    y.backward(seed);
    const int64_t gradient = 1024 * 4;
    EXPECT_EQ(memory::stats(kCPU).peak_bytes, before + gradient);
    EXPECT_EQ(live(), before + gradient);  // it became x.grad
  }
}

// Note [Taking over the incoming gradient]: softmax's backward writes its result over an incoming
// gradient no one else holds (here the product's), so it allocates nothing, and gives the bits
// of the same backward from a gradient the caller holds (which it must not overwrite).
TEST(Memory, SoftmaxBackwardWritesOverAnUnsharedGradient) {
  for (const bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    const auto f = [log](const Tensor& t) { return log ? log_softmax(t, -1) : softmax(t, -1); };
    manual_seed(4);
    const Tensor x = randn({64, 32}).requires_grad_(), w = randn({64, 32});
    const std::vector<double> seed_values = values(w);
    const Tensor held = x.detach().requires_grad_();
    f(held).backward(w);
    Tensor loss = sum(f(x) * w);
    const int64_t before = live();
    memory::reset_peak();
    loss.backward();
    const int64_t gradient = 64 * 32 * 4, seed = 4;
    EXPECT_EQ(memory::stats(kCPU).peak_bytes, before + seed + gradient);  // the product's, then x.grad
    EXPECT_EQ(values(x.grad()), values(held.grad()));
    EXPECT_EQ(values(w), seed_values);  // the caller's seed was left alone
  }
}

// One gradient reaching two softmaxes (an add's backward passes the same tensor to both): the
// first must leave it for the second, which may then take it over.
TEST(Memory, ASharedIncomingGradientIsLeftForItsOtherUser) {
  manual_seed(5);
  const Tensor a = randn({16, 8}).requires_grad_(), b = a.detach().clone().requires_grad_(), w = randn({16, 8});
  sum((softmax(a, -1) + softmax(b, -1)) * w).backward();
  const Tensor alone = a.detach().requires_grad_();
  softmax(alone, -1).backward(w);
  EXPECT_EQ(values(a.grad()), values(alone.grad()));
  EXPECT_EQ(values(b.grad()), values(alone.grad()));
}

// Note [Two batch levels]: attention's head-split views of a fused projection go to the gemm as
// they are, so the product allocates its output and nothing else, and equals the product of the
// copied operands: bitwise on OpenBLAS, whose kernel does not depend on the leading dimension;
// within rounding on oneDNN, which chooses how to pack an operand by its leading dimension.
TEST(Memory, MatmulOfHeadSplitViewsCopiesNothing) {
  manual_seed(3);
  const int64_t b = 3, t = 5, h = 2, e = 4;
  const Tensor qkv = randn({b, t, 3 * h * e});
  std::vector<Tensor> parts = chunk(qkv, 3, -1);
  for (Tensor& p : parts) p = p.reshape({b, t, h, e}).transpose(1, 2);  // [b, h, t, e], strides [t*3he, e, 3he, 1]
  const Tensor q = parts[0], kt = parts[1].transpose(-2, -1);
  for (GemmBackend backend : testutil::gemm_backends()) {
    SCOPED_TRACE(backend == GemmBackend::OneDNN ? "oneDNN" : "OpenBLAS");
    testutil::GemmBackendScope scope(backend);
    const auto expect_same = [&](const Tensor& got, const Tensor& want) {
      if (backend == GemmBackend::OpenBLAS) {
        EXPECT_EQ(values(got), values(want));
      } else {
        testutil::expect_near(got, values(want), 1e-5);
      }
    };
    const int64_t before = live();
    memory::reset_peak();
    const Tensor scores = matmul(q, kt);
    EXPECT_EQ(memory::stats(kCPU).peak_bytes, before + b * h * t * t * 4);
    expect_same(scores, matmul(q.contiguous(), kt.contiguous()));
    const Tensor mixed = matmul(scores, parts[2]);  // a contiguous operand with a two-level one
    expect_same(mixed, matmul(scores, parts[2].contiguous()));
  }
}

// Note [A weight's gradient in its layout]: the gradient of weight.t() is made transposed, so the
// weight takes it over as .grad: the backward allocates the one [out, in] gradient, no copy.
TEST(Memory, LinearWeightGradientIsNotCopied) {
  manual_seed(4);
  const Tensor x = randn({5, 3}), seed = randn({5, 2});
  Tensor w = randn({2, 3}).requires_grad_();
  const Tensor y = matmul(x, w.t());
  const int64_t before = live();
  memory::reset_peak();
  y.backward(seed);
  EXPECT_EQ(memory::stats(kCPU).peak_bytes, before + 2 * 3 * 4);
  EXPECT_TRUE(w.grad().is_contiguous());
  EXPECT_EQ(values(w.grad()), values(matmul(seed.t(), x)));
}

// Note [Split as one node]: the pieces' gradients are written into one input-sized tensor (zeros
// only for the piece that got none), which becomes the input's .grad: no input-sized zero tensor
// per piece and no sum of them.
TEST(Memory, SplitBackwardMakesOneInputSizedGradient) {
  Tensor x = zeros({4, 6}).requires_grad_();
  const std::vector<Tensor> pieces = chunk(x, 3, 1);
  const Tensor y = pieces[0] + pieces[2];
  const Tensor seed = arange(8.0).reshape({4, 2});
  const int64_t before = live();
  memory::reset_peak();
  y.backward(seed);
  EXPECT_EQ(memory::stats(kCPU).peak_bytes, before + 4 * 6 * 4);
  EXPECT_EQ(live(), before + 4 * 6 * 4);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 1, 0, 0, 0, 1, 2, 3, 0, 0, 2, 3,
                                                   4, 5, 0, 0, 4, 5, 6, 7, 0, 0, 6, 7}));
}
