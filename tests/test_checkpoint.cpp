// utils::checkpoint: exact gradients, RNG replay, BatchNorm statistics once, early stop,
// nesting, multiple inputs/outputs, retain_graph, the error paths, selective policies,
// checkpoint_sequential and switching checkpointing on and off in a model.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/recompute.h"
#include "core/generator.h"
#include "nn/nn.h"
#include "utils/checkpoint.h"
#include "utils/checkpoint_sequential.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

struct Mlp : nn::Module {
  nn::Linear fc1{16, 32}, fc2{32, 32}, fc3{32, 4};
  nn::Dropout drop{0.3};
  nn::BatchNorm1d bn{32};
  Mlp() {
    register_module("fc1", fc1);
    register_module("bn", bn);
    register_module("fc2", fc2);
    register_module("drop", drop);
    register_module("fc3", fc3);
  }
  // The middle part, which the tests checkpoint.
  Tensor body(const Tensor& x) { return drop(relu(fc2(relu(bn(fc1(x)))))); }
  Tensor forward(const Tensor& x) override { return fc3(body(x)); }
};

// One training step's loss and gradients, with the body checkpointed or not.
std::vector<std::vector<float>> step(Mlp& net, const Tensor& x, const Tensor& y, bool checkpointed,
                                     const utils::CheckpointOptions& options = {}) {
  net.zero_grad();
  Tensor h = checkpointed ? utils::checkpoint([&](const Tensor& in) { return net.body(in); }, x, options) : net.body(x);
  Tensor loss = cross_entropy(net.fc3(h), y);
  loss.backward();
  std::vector<std::vector<float>> out{values(loss)};
  for (const Tensor& p : net.parameters()) out.push_back(values(p.grad()));
  return out;
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    manual_seed(0);
    utils::checkpoint_stats() = {};
  }
};

}  // namespace

TEST_F(Checkpoint, ForwardRunsTwice) {
  int runs = 0;
  Tensor w = randn({4, 4}).requires_grad_();
  auto fn = [&](const Tensor& x) {
    ++runs;
    return relu(matmul(x, w));
  };
  Tensor x = randn({3, 4});
  sum(fn(x)).backward();
  EXPECT_EQ(runs, 1);
  runs = 0;
  sum(utils::checkpoint(fn, x)).backward();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 1);
}

TEST_F(Checkpoint, GradientsAreBitwiseIdenticalWithDropoutAndBatchNorm) {
  Mlp net;
  Tensor x = randn({8, 16}), y = randint(0, 4, {8});
  manual_seed(42);
  auto plain = step(net, x, y, false);
  nn::StateDict after_plain;
  for (auto& [k, v] : net.named_buffers()) after_plain[k] = v.clone();
  net.bn.reset_running_stats();
  manual_seed(42);
  auto checkpointed = step(net, x, y, true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i], checkpointed[i]) << "tensor " << i;
  // BatchNorm statistics were updated once, not twice
  for (auto& [k, v] : net.named_buffers()) EXPECT_EQ(values(v.to(kFloat32)), values(after_plain[k].to(kFloat32))) << k;
  EXPECT_EQ(net.bn.num_batches_tracked.item(), 1.0);
  EXPECT_GT(utils::checkpoint_stats().tensors_packed, 0);
}

TEST_F(Checkpoint, CallersGeneratorStateIsRestoredAfterTheRecompute) {
  Mlp net;
  Tensor x = randn({8, 16}), y = randint(0, 4, {8});
  Tensor h = utils::checkpoint([&](const Tensor& in) { return net.body(in); }, x);
  GeneratorState before = default_generator().state();
  cross_entropy(net.fc3(h), y).backward();
  EXPECT_EQ(default_generator().state(), before);
}

TEST_F(Checkpoint, WithoutRngReplayDebugModeNamesTheOpThatDiffers) {
  Tensor w = randn({6, 6}).requires_grad_();
  auto fn = [&](const Tensor& x) { return matmul(dropout(x, 0.5), w); };
  utils::CheckpointOptions options;
  options.preserve_rng_state = false;
  options.debug = true;
  Tensor x = randn({4, 6}).requires_grad_();
  Tensor out = utils::checkpoint(fn, x, options);
  expect_error([&] { sum(out).backward(); }, "the first op whose recomputed output differs from the forward's is dropout");
  // with replay (the default), debug mode finds nothing to report
  options.preserve_rng_state = true;
  Tensor again = utils::checkpoint(fn, x, options);
  sum(again).backward();
}

TEST_F(Checkpoint, ByDefaultARecomputeWithOtherValuesIsAnError) {
  // Without RNG replay the recompute draws another dropout mask: the gradient would be wrong.
  Tensor w = randn({6, 6}).requires_grad_();
  auto fn = [&](const Tensor& x) { return matmul(dropout(x, 0.5), w); };
  utils::CheckpointOptions options;
  options.preserve_rng_state = false;
  Tensor x = randn({4, 6}).requires_grad_();
  expect_error([&] { sum(utils::checkpoint(fn, x, options)).backward(); },
               "holds other values than the forward saved");
}

// Note [One fingerprint per saved view]: a view saved twice is fingerprinted once, and a tensor
// in memory freed by an earlier saved tensor (same address, shape and version) is not taken for
// it. The first exp's output is saved (by exp) and freed, and the second's is made in the same
// block of the caching allocator: taken for the first, it would get the first's fingerprint in
// the forward and fail an honest recompute. When it does differ in the recompute, the check must
// see it.
TEST_F(Checkpoint, ValueCheckIsNotFooledByMemoryReusedBetweenSaves) {
  double scale = 1.5;
  const void* first_address = nullptr;
  const void* second_address = nullptr;
  auto fn = [&](const Tensor& x) {
    const Tensor scaled = x * scale;  // made first, so that the second exp gets the first's block
    Tensor first_sum;
    {
      const Tensor first = exp(x * 2.0);
      first_address = first.raw_data();
      first_sum = sum(first);
    }
    const Tensor second = exp(scaled);
    second_address = second.raw_data();
    return first_sum + sum(second * second);  // `second` saved twice: by exp and by the product
  };
  Tensor x = randn({3, 5}).requires_grad_();
  Tensor out = utils::checkpoint(fn, x);
  EXPECT_EQ(first_address, second_address) << "the second exp no longer reuses the first's block";
  out.backward();  // an honest recompute passes
  const Tensor d = x.detach();
  testutil::expect_near(x.grad(), testutil::values(exp(d * 2.0) * 2.0 + exp(d * 3.0) * 3.0), 1e-3);

  Tensor changed = utils::checkpoint(fn, x);
  scale = 3.0;
  expect_error([&] { changed.backward(); }, "holds other values than the forward saved");
}

// Note [Saved tensors not recomputed]: the value check reads only what the region made; a
// parameter or an input saved as they were is the forward's tensor in the recompute too, unless
// written since.
TEST_F(Checkpoint, ValueCheckFingerprintsOnlyWhatTheRegionMade) {
  nn::Linear linear(4, 3);
  auto fn = [&](const Tensor& x) { return exp(linear(x)); };
  Tensor x = randn({2, 4}).requires_grad_();
  sum(utils::checkpoint(fn, x)).backward();
  // The product saved x and the weight's transposed view, exp its output: only exp's was made in
  // the region, fingerprinted in the forward and in the recompute.
  EXPECT_EQ(utils::checkpoint_stats().tensors_packed, 3);
  EXPECT_EQ(utils::checkpoint_stats().fingerprints_taken, 2);
  EXPECT_EQ(utils::checkpoint_stats().values_compared, 1);

  // The weight written in place between the forward and the backward: a new version.
  linear.weight.set_grad(Tensor());
  Tensor out = utils::checkpoint(fn, x);
  {
    NoGradGuard no_grad;
    linear.weight.mul_(2.0);
  }
  expect_error([&] { sum(out).backward(); },
               "(saved by matmul, [4, 3]) is not the tensor the forward saved, made before the checkpointed region "
               "(a parameter or an input): it was written in place since the forward");

  // A module whose weight is replaced by another tensor with the same shape between the two.
  Tensor replaced = utils::checkpoint(fn, x);
  linear.weight = linear.weight.detach().clone().requires_grad_();
  expect_error([&] { sum(replaced).backward(); },
               "is not the tensor the forward saved, made before the checkpointed region (a parameter or an input): "
               "the checkpointed function saved another tensor in its place");
}

TEST_F(Checkpoint, ValueCheckCatchesStateThatChangedBeforeBackward) {
  double scale = 2.0;  // captured by reference: the recompute sees the new value
  auto fn = [&](const Tensor& x) { return exp(x * scale); };
  Tensor x = randn({3, 5}).requires_grad_();
  Tensor out = utils::checkpoint(fn, x);
  scale = 3.0;
  expect_error([&] { sum(out).backward(); }, "recomputed tensor 0 (saved by exp, [3, 5]) holds other values");

  // The switch: with check_values off the same mistake goes unnoticed (the gradient is then
  // exp(3x) * 2 instead of exp(2x) * 2 — which is what the check is for).
  utils::CheckpointOptions unchecked;
  unchecked.check_values = false;
  scale = 2.0;
  x.set_grad(Tensor());
  Tensor quiet = utils::checkpoint(fn, x, unchecked);
  scale = 3.0;
  sum(quiet).backward();
  testutil::expect_near(x.grad(), testutil::values(exp(x.detach() * 3.0) * 2.0), 1e-4);
}

TEST(Fingerprint, SameValuesSameBitsAndAnyChangeShows) {
  Tensor a = randn({600, 257});  // large enough for the OpenMP loop to split it (Note [The parallel grain])
  const uint64_t f = fingerprint(a);
  EXPECT_EQ(fingerprint(a.clone()), f);
  const int threads = get_num_threads();
  set_num_threads(1);
  EXPECT_EQ(fingerprint(a), f) << "the sum modulo 2^64 must not depend on how the loop is split";
  set_num_threads(threads);

  Tensor flipped = a.clone();
  float* p = flipped.data<float>();
  uint32_t bits;
  std::memcpy(&bits, &p[1000], sizeof bits);
  bits ^= 1u;  // the last mantissa bit of one element
  std::memcpy(&p[1000], &bits, sizeof bits);
  EXPECT_NE(fingerprint(flipped), f);

  Tensor swapped = a.clone();
  std::swap(swapped.data<float>()[0], swapped.data<float>()[1]);
  EXPECT_NE(fingerprint(swapped), f);

  // A view is fingerprinted in its own element order, like its contiguous copy.
  Tensor t = a.t();
  EXPECT_EQ(fingerprint(t), fingerprint(t.contiguous()));
  EXPECT_NE(fingerprint(t), f);
  // Every dtype.
  EXPECT_NE(fingerprint(arange(10.0, kInt64)), fingerprint(arange(1.0, 11.0, 1.0, kInt64)));
  EXPECT_EQ(fingerprint(ones({4}, kUInt8)), fingerprint(ones({4}, kUInt8)));
  EXPECT_NE(fingerprint(zeros({4}, kFloat64)), fingerprint(full({4}, -0.0, kFloat64)));
  expect_error([] { fingerprint(Tensor()); }, "[fingerprint]");
}

// Note [Tensor fingerprints] restated word by word over the row-major elements, independently of
// the kernels (core/kernel_bodies/fingerprint.h cannot be included next to ops.h's fingerprint()): the CPU
// kernel's running sums (Note [Fingerprints by running sums] in core/cpu/fingerprint.cpp) must give
// these bits for every dtype, length and layout.
uint64_t fingerprint_by_definition(const Tensor& t) {
  const Tensor c = t.contiguous();
  uint64_t plain = 0, weighted = 0, position = 0;
  auto add_word = [&](uint32_t word) {
    plain += word;
    weighted += ++position * word;  // (p + 1) * w_p
  };
  dispatch(c.dtype(), [&]<class T>() {
    const T* p = c.data<T>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      if constexpr (sizeof(T) == 8) {
        uint64_t bits;
        std::memcpy(&bits, &p[i], 8);
        add_word(static_cast<uint32_t>(bits));
        add_word(static_cast<uint32_t>(bits >> 32));
      } else if constexpr (sizeof(T) == 4) {
        uint32_t bits;
        std::memcpy(&bits, &p[i], 4);
        add_word(bits);
      } else {
        add_word(p[i]);
      }
    }
  });
  uint64_t z = plain;  // SplitMix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (z ^ (z >> 31)) ^ weighted;
}

TEST(Fingerprint, RunningSumsGiveTheDefinitionsBits) {
  // Lengths around the kernel's lanes (16) and short runs (64), and past the parallel grain.
  for (int64_t n : {0, 1, 15, 16, 17, 63, 64, 65, 100, 1000, 300007}) {
    Tensor x = randn({n});
    EXPECT_EQ(fingerprint(x), fingerprint_by_definition(x)) << "float32, " << n << " elements";
    Tensor d = randn({n}, kFloat64);
    EXPECT_EQ(fingerprint(d), fingerprint_by_definition(d)) << "float64, " << n << " elements";
    Tensor i = randint(-(int64_t{1} << 40), int64_t{1} << 40, {n}, kInt64);
    EXPECT_EQ(fingerprint(i), fingerprint_by_definition(i)) << "int64, " << n << " elements";
    Tensor b = randint(0, 256, {n}, kUInt8);
    EXPECT_EQ(fingerprint(b), fingerprint_by_definition(b)) << "uint8, " << n << " elements";
  }
  // Strided rows, short and long, of every dtype.
  for (int64_t rows : {3, 70}) {
    Tensor f = randn({rows, 200}).narrow(1, 5, 150).t();
    EXPECT_EQ(fingerprint(f), fingerprint_by_definition(f)) << "float32 view, " << rows << " rows";
    Tensor d = randn({rows, 90}, kFloat64).t();
    EXPECT_EQ(fingerprint(d), fingerprint_by_definition(d)) << "float64 view, " << rows << " rows";
    Tensor b = randint(0, 256, {rows, 90}, kUInt8).t();
    EXPECT_EQ(fingerprint(b), fingerprint_by_definition(b)) << "uint8 view, " << rows << " rows";
  }
}

// Note [Fingerprints of strided views]: every view is read where it lies, in memory order, and
// its bits are those of its row-major copy, whatever the layout.
TEST(Fingerprint, EveryLayoutGivesTheBitsOfItsContiguousCopy) {
  Tensor a = randn({12, 7, 1600});  // large enough for the OpenMP loop to split it (Note [The parallel grain])
  Tensor ones_dims = randn({1, 300, 1, 7});
  // attention's q: a head-split view of one [b, t, 3 * h * e] projection, strides [t*3he, e, 3he, 1]
  Tensor q = randn({8, 160, 3 * 4 * 32}).narrow(2, 0, 4 * 32).view({8, 160, 4, 32}).transpose(1, 2);
  // Note [Fingerprints of short rows]: tiles of 20 lanes (a group of 16 and one of 4), of two
  // words each, and 7 x 1499 rounds, which two threads split inside an outer row
  Tensor q64 = randn({7, 1499, 3 * 5 * 4}, kFloat64).narrow(2, 20, 5 * 4).view({7, 1499, 5, 4}).transpose(1, 2);
  const std::vector<std::pair<const char*, Tensor>> views = {
      {"attention's head-split q", q},
      {"head-split float64, 5 heads of 4", q64},
      {"head-split uint8", randint(0, 256, {4, 50, 24}, kUInt8).narrow(2, 8, 8).view({4, 50, 2, 4}).transpose(1, 2)},
      {"short rows, broadcast outside them", randn({1, 40, 12}).expand({30, 40, 12})},
      {"every other element of the rows", a.slice(2, 1, 1600, 2)},
      {"broadcast in the middle", randn({6, 1, 5}).expand({6, 4, 5})},
      {"permute 2,0,1", a.permute({2, 0, 1})},
      {"permute 1,2,0", a.permute({1, 2, 0})},
      {"transpose 0,2", a.transpose(0, 2)},
      {"size-1 dims reversed", ones_dims.permute({3, 2, 1, 0})},
      {"float64 transposed", randn({40, 30}, kFloat64).t()},
      {"uint8 transposed", randint(0, 256, {33, 65}, kUInt8).t()},
      {"narrowed (gaps between rows)", a.narrow(2, 1, 200)},
      {"narrowed and permuted", a.narrow(0, 1, 3).permute({2, 1, 0})},
      {"broadcast", randn({5, 1}).expand({5, 9})},
  };
  const int threads = get_num_threads();
  for (const auto& [what, v] : views) {
    const uint64_t row_major = fingerprint(v.contiguous());
    EXPECT_EQ(fingerprint(v), row_major) << what;
    set_num_threads(1);
    EXPECT_EQ(fingerprint(v), row_major) << what << ", one thread";
    set_num_threads(threads);
  }
  // The logical order counts: a transpose of a square matrix holds the same values elsewhere.
  Tensor square = randn({64, 64});
  EXPECT_NE(fingerprint(square.t()), fingerprint(square));
}

// Note [Fingerprints of 16-bit tensors]: a bfloat16 or float16 tensor has its float32 copy's
// fingerprint, in every layout, computed without making that copy.
TEST(Fingerprint, SixteenBitTensorsGiveTheirFloat32BitsWithoutACopy) {
  for (const DType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = randn({8, 160, 96}).to(dtype);
    for (const Tensor& v : {x, x.narrow(2, 0, 64).transpose(1, 2), x.slice(0, 1, 8, 3)}) {
      const uint64_t widened = fingerprint(v.to(kFloat32));
      const int64_t before = memory::stats().live_bytes;
      memory::reset_peak();
      EXPECT_EQ(fingerprint(v), widened);
      EXPECT_EQ(memory::stats().peak_bytes, before);  // nothing allocated
    }
    // A change of one element shows.
    Tensor changed = x.clone();
    changed.view({-1}).narrow(0, 777, 1).fill_(3.0);
    EXPECT_NE(fingerprint(changed), fingerprint(x));
  }
}

TEST_F(Checkpoint, EarlyStopSkipsWhatFollowsTheLastSavedTensor) {
  int heads = 0, tails = 0;
  Tensor x = randn({5}).requires_grad_();
  auto fn = [&](const Tensor& in) {
    ++heads;
    Tensor a = exp(in);  // saves its output: the last saved tensor
    Tensor b = a + 1.0;  // saves nothing
    ++tails;
    return b;
  };
  sum(utils::checkpoint(fn, x)).backward();
  EXPECT_EQ(heads, 2);
  EXPECT_EQ(tails, 1);  // the recompute stopped before reaching it
  EXPECT_EQ(utils::checkpoint_stats().early_stops, 1);
  std::vector<float> expected = values(exp(x.detach()));
  EXPECT_EQ(values(x.grad()), expected);
}

TEST_F(Checkpoint, NestedCheckpoints) {
  nn::Linear a(6, 6), b(6, 6), c(6, 2);
  Tensor x = randn({3, 6}).requires_grad_();
  // The checkpointed functions run again during backward, after model() returned: they capture
  // by value what does not outlive the call (the flag, the inner function).
  auto model = [&](bool nested) {
    auto inner = [&b](const Tensor& h) { return relu(b(h)); };
    auto outer = [&a, &c, inner, nested](const Tensor& h) {
      return c(nested ? utils::checkpoint(inner, relu(a(h))) : inner(relu(a(h))));
    };
    return nested ? utils::checkpoint(outer, x) : outer(x);
  };
  sum(model(false)).backward();
  std::vector<float> gx = values(x.grad()), gb = values(b.weight.grad());
  x.set_grad(Tensor());
  a.zero_grad();
  b.zero_grad();
  c.zero_grad();
  sum(model(true)).backward();
  EXPECT_EQ(values(x.grad()), gx);
  EXPECT_EQ(values(b.weight.grad()), gb);
  EXPECT_EQ(utils::checkpoint_stats().forwards, 3);  // outer, inner, inner again inside the outer recompute
}

TEST_F(Checkpoint, SeveralInputsAndOutputsSomeWithoutGrad) {
  Tensor x = randn({4}).requires_grad_(), y = randn({4});  // y does not require grad
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * in[1], exp(in[0]) + in[1]}; };
  auto loss_of = [](const std::vector<Tensor>& o) { return sum(o[0]) + sum(o[1] * o[1]); };
  loss_of(fn({x, y})).backward();
  std::vector<float> plain = values(x.grad());
  x.set_grad(Tensor());
  loss_of(utils::checkpoint(fn, {x, y})).backward();
  EXPECT_EQ(values(x.grad()), plain);
}

TEST_F(Checkpoint, SecondBackwardWithRetainGraphRecomputesAgain) {
  Tensor w = randn({4, 4}).requires_grad_();
  Tensor out = sum(utils::checkpoint([&](const Tensor& x) { return tanh(matmul(x, w)); }, randn({2, 4})));
  out.backward(Tensor(), /*retain_graph=*/true);
  std::vector<float> once = values(w.grad());
  out.backward();
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 2);
  std::vector<float> twice = values(w.grad());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
}

TEST_F(Checkpoint, ModifyingAnInputInPlaceBeforeBackwardFails) {
  Tensor w = randn({4, 4}).requires_grad_();
  Tensor x = randn({2, 4});
  Tensor out = sum(utils::checkpoint([&](const Tensor& in) { return matmul(in, w); }, x));
  x.mul_(2.0);
  expect_error([&] { out.backward(); }, "was modified in place (version 1, expected 0)");
}

TEST_F(Checkpoint, DeterminismCheckReportsShapeAndCountChanges) {
  int calls = 0;
  Tensor x = randn({4, 3}).requires_grad_(), other = randn({2, 3}).requires_grad_();
  auto shape_changes = [&](const Tensor& in) { return ++calls == 1 ? exp(in) : exp(other); };
  Tensor a = sum(utils::checkpoint(shape_changes, x));
  try {
    a.backward();
    ADD_FAILURE() << "expected a CheckpointError";
  } catch (const utils::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("recomputed tensor 0 (saved by exp) has shape [2, 3]"), std::string::npos)
        << e.what();
  }
  calls = 0;
  auto ops_change = [&](const Tensor& in) { return ++calls == 1 ? exp(exp(in)) : exp(in) + 1.0; };
  Tensor b = sum(utils::checkpoint(ops_change, x));
  expect_error([&] { b.backward(); }, "op 1 of the recompute is affine but the forward ran exp");
  calls = 0;
  auto fewer = [&](const Tensor& in) { return ++calls == 1 ? exp(exp(in)) : exp(in); };
  Tensor c = sum(utils::checkpoint(fewer, x));
  expect_error([&] { c.backward(); }, "the recompute saved 1 tensor(s) but the forward saved 2");
}

TEST_F(Checkpoint, NoGradModeJustRunsTheFunction) {
  NoGradGuard no_grad;
  int runs = 0;
  Tensor out = utils::checkpoint([&](const Tensor& x) { ++runs; return x * 2.0; }, ones({2}));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(utils::checkpoint_stats().forwards, 0);
  EXPECT_EQ(values(out), (std::vector<float>{2, 2}));
}

TEST_F(Checkpoint, SaveMatmulsReplaysTheMatmulsAndKeepsGradientsExact) {
  nn::Linear a(8, 8), b(8, 8);
  Tensor x = randn({4, 8}).requires_grad_();
  auto fn = [&](const Tensor& in) { return relu(b(relu(a(in)))); };
  sum(fn(x)).backward();
  std::vector<float> gx = values(x.grad()), ga = values(a.weight.grad());
  x.set_grad(Tensor());
  a.zero_grad();
  b.zero_grad();
  utils::CheckpointOptions options;
  options.policy = utils::save_matmuls();
  sum(utils::checkpoint(fn, x, options)).backward();
  EXPECT_EQ(values(x.grad()), gx);
  EXPECT_EQ(values(a.weight.grad()), ga);
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 2);  // both matmuls came from the forward
}

TEST_F(Checkpoint, CheckpointSequentialMatchesThePlainModel) {
  nn::Sequential seq;
  for (int i = 0; i < 6; ++i) {
    seq.add<nn::Linear>(8, 8);
    seq.add<nn::Tanh>();
  }
  Tensor x = randn({3, 8}).requires_grad_();
  sum(seq(x)).backward();
  std::vector<float> plain = values(x.grad());
  for (int64_t segments : {1, 2, 3, 4, 12}) {
    x.set_grad(Tensor());
    seq.zero_grad();
    sum(utils::checkpoint_sequential(seq, segments, x)).backward();
    EXPECT_EQ(values(x.grad()), plain) << segments << " segments";
  }
  expect_error([&] { utils::checkpoint_sequential(seq, 13, x); },
               "[checkpoint_sequential] segments must be in [1, 12] for a Sequential of 12 module(s), got 13");
}

TEST_F(Checkpoint, SwitchingBlocksOnAndOff) {
  nn::Sequential seq;
  seq.add<nn::Linear>(4, 4);
  seq.add<nn::ReLU>();
  seq.add<nn::Linear>(4, 4);
  Tensor x = randn({2, 4});
  EXPECT_EQ(utils::checkpoint_modules<nn::Linear>(seq), 2);
  sum(seq(x)).backward();
  EXPECT_EQ(utils::checkpoint_stats().forwards, 2);
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 2);
  EXPECT_EQ(utils::uncheckpoint_modules(seq), 2);
  sum(seq(x)).backward();
  EXPECT_EQ(utils::checkpoint_stats().forwards, 2);  // off again: no new checkpointed forward
}

// Note [Forward hooks]: a checkpointed module's own hooks run once per call; the hooks of a module
// inside it run again when backward recomputes it, and their replacements keep the recompute
// faithful, so the gradients match the plain run's.
TEST_F(Checkpoint, ForwardHooksOfACheckpointedModuleRunOnceAndInnerOnesRunInTheRecompute) {
  auto build = [](nn::Sequential& net) {
    auto& block = net.add<nn::Sequential>();
    block.add<nn::Linear>(4, 4);
    block.add<nn::Tanh>();
    net.add<nn::Linear>(4, 2);
  };
  manual_seed(3);
  nn::Sequential plain, ckpt;
  build(plain);
  build(ckpt);
  ckpt.load_state_dict(plain.state_dict());
  struct Counts {
    int outer = 0, inner = 0, inner_recomputing = 0;
  };
  auto add_hooks = [](nn::Sequential& net, Counts& counts) {
    auto& block = net.at<nn::Sequential>(0);
    block.register_forward_hook([&counts](nn::Module&, const Tensor&, const Tensor& out) {
      ++counts.outer;
      return out * 0.5;
    });
    block[0].register_forward_hook([&counts](nn::Module&, const Tensor&, const Tensor& out) {
      ++counts.inner;
      if (autograd::is_recomputing()) ++counts.inner_recomputing;
      return out - 0.25;
    });
  };
  Counts plain_counts, ckpt_counts;
  add_hooks(plain, plain_counts);
  add_hooks(ckpt, ckpt_counts);
  Tensor x = randn({3, 4});
  sum(plain(x)).backward();
  EXPECT_EQ(utils::checkpoint_modules(ckpt, [&](nn::Module& m) { return &m == &ckpt[0]; }), 1);
  sum(ckpt(x)).backward();
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 1);
  EXPECT_EQ(plain_counts.outer, 1);
  EXPECT_EQ(plain_counts.inner, 1);
  EXPECT_EQ(ckpt_counts.outer, 1);              // around the checkpoint: once per call
  EXPECT_EQ(ckpt_counts.inner, 2);              // the forward and the recompute
  EXPECT_EQ(ckpt_counts.inner_recomputing, 1);  // and it can tell which is which
  auto plain_params = plain.named_parameters(), ckpt_params = ckpt.named_parameters();
  ASSERT_EQ(plain_params.size(), ckpt_params.size());
  for (size_t i = 0; i < plain_params.size(); ++i)
    EXPECT_EQ(values(plain_params[i].second.grad()), values(ckpt_params[i].second.grad())) << plain_params[i].first;
}

// Note [Modules with several inputs]: checkpoint_modules over a layer called with an input that
// needs a gradient, a mask that does not and an optional tensor left out, with Dropout and
// BatchNorm inside: bitwise the plain gradients, and the statistics updated once.
struct MaskedBlock : nn::MultiInputModule<MaskedBlock> {
  nn::Linear fc{8, 8};
  nn::BatchNorm1d bn{8};
  nn::Dropout drop{0.25};
  MaskedBlock() {
    register_module("fc", fc);
    register_module("bn", bn);
    register_module("drop", drop);
  }
  Tensor forward(const Tensor& x, const Tensor& mask, const Tensor& shift = Tensor(), bool residual = true) {
    Tensor h = drop(relu(bn(fc(x)))) * mask;
    if (shift.defined()) h = h + shift;
    return residual ? x + h : h;
  }
};

struct TwoBlocks : nn::Module {
  nn::ModuleList blocks;
  TwoBlocks() {
    blocks.add<MaskedBlock>();
    blocks.add<MaskedBlock>();
    register_module("blocks", blocks);
  }
  Tensor run(const Tensor& x, const Tensor& mask, const Tensor& shift) {
    Tensor h = blocks.at<MaskedBlock>(0)(x, mask);
    return blocks.at<MaskedBlock>(1)(h, mask, shift, false);
  }
};

TEST_F(Checkpoint, CheckpointModulesTakesEveryInputOfAMultiInputLayer) {
  TwoBlocks plain, ckpt;
  ckpt.load_state_dict(plain.state_dict());
  const Tensor x0 = randn({6, 8}), mask = (randn({6, 8}) > 0.0).to(kFloat32), shift0 = randn({8});
  auto step = [&](TwoBlocks& net) {
    Tensor x = x0.detach().requires_grad_(), shift = shift0.detach().requires_grad_();
    manual_seed(11);
    sum(net.run(x, mask, shift)).backward();
    return std::pair{x.grad(), shift.grad()};
  };
  auto [plain_dx, plain_dshift] = step(plain);
  EXPECT_EQ(utils::checkpoint_modules<MaskedBlock>(ckpt), 2);
  auto [ckpt_dx, ckpt_dshift] = step(ckpt);
  EXPECT_EQ(utils::checkpoint_stats().forwards, 2);
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 2);
  EXPECT_EQ(values(ckpt_dx), values(plain_dx));
  EXPECT_EQ(values(ckpt_dshift), values(plain_dshift));
  auto plain_params = plain.named_parameters(), ckpt_params = ckpt.named_parameters();
  ASSERT_EQ(plain_params.size(), ckpt_params.size());
  for (size_t i = 0; i < plain_params.size(); ++i)
    EXPECT_EQ(values(plain_params[i].second.grad()), values(ckpt_params[i].second.grad())) << plain_params[i].first;
  for (const auto& [name, buffer] : plain.named_buffers())  // BatchNorm's statistics: updated once
    EXPECT_EQ(values(buffer.to(kFloat32)), values(ckpt.state_dict().at(name).to(kFloat32))) << name;
}

TEST_F(Checkpoint, DropsActivationsFromLiveMemory) {
  nn::Sequential seq;
  for (int i = 0; i < 8; ++i) {
    seq.add<nn::Linear>(64, 64);
    seq.add<nn::ReLU>();
  }
  Tensor x = randn({32, 64});
  const int64_t base = memory::stats().live_bytes;
  Tensor plain = seq(x);
  const int64_t plain_live = memory::stats().live_bytes - base;
  plain = Tensor();
  Tensor ck = utils::checkpoint(seq, x);
  const int64_t ck_live = memory::stats().live_bytes - base;
  // plain: 8 relu outputs saved (the last one is also the output) = 8 * 32*64*4 bytes;
  // checkpointed: only the output is alive (the input x is held by the caller anyway).
  EXPECT_EQ(plain_live, 8 * 32 * 64 * 4);
  EXPECT_EQ(ck_live, 32 * 64 * 4);
}

TEST_F(Checkpoint, ResNetBlocksInTrainingModeGiveBitwiseIdenticalGradientsAndStatistics) {
  auto build = [](nn::Sequential& net) {
    net.add<nn::Conv2d>(nn::Conv2dOptions(1, 8, 3).padding(1).bias(false));
    net.add<nn::BatchNorm2d>(8);
    net.add<nn::ReLU>();
    net.add<nn::BasicBlock>(8, 8, 1);
    net.add<nn::BasicBlock>(8, 16, 2);  // projection shortcut
    net.add<nn::AdaptiveAvgPool2d>(1);
    net.add<nn::Flatten>();
    net.add<nn::Linear>(16, 10);
  };
  manual_seed(7);
  nn::Sequential plain, ckpt;
  build(plain);
  build(ckpt);
  ckpt.load_state_dict(plain.state_dict());
  Tensor x = randn({4, 1, 12, 12}), y = randint(0, 10, {4});
  cross_entropy(plain(x), y).backward();
  EXPECT_EQ(utils::checkpoint_modules<nn::BasicBlock>(ckpt), 2);
  cross_entropy(ckpt(x), y).backward();
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 2);
  auto plain_params = plain.named_parameters(), ckpt_params = ckpt.named_parameters();
  ASSERT_EQ(plain_params.size(), ckpt_params.size());
  for (size_t i = 0; i < plain_params.size(); ++i)
    EXPECT_EQ(values(plain_params[i].second.grad()), values(ckpt_params[i].second.grad())) << plain_params[i].first;
  auto plain_buffers = plain.named_buffers(), ckpt_buffers = ckpt.named_buffers();
  for (size_t i = 0; i < plain_buffers.size(); ++i)  // running stats and num_batches_tracked: once
    EXPECT_EQ(values(plain_buffers[i].second.to(kFloat32)), values(ckpt_buffers[i].second.to(kFloat32)))
        << plain_buffers[i].first;
}
