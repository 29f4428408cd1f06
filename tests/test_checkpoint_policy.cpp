// Checkpoint policies that see the op (Note [Checkpoint policies] and Note [Decision strengths] in
// utils/checkpoint.cpp; Note [Module paths] in nn/module_path.h): what a policy is told, how the
// regions' answers combine, the ready-made policies' gradients and the memory of keeping
// everything.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/generator.h"
#include "nn/module_path.h"
#include "nn/multi_input_module.h"
#include "nn/nn.h"
#include "utils/checkpoint.h"
#include "utils/checkpoint_sequential.h"
#include "utils/op_planner.h"
#include "test_helpers.h"

using namespace ember;
using testutil::expect_error;
using testutil::values;
using utils::CheckpointDecision;
using utils::OpInfo;

namespace {

struct Mlp : nn::Module {
  nn::Linear fc1{4, 8, false}, fc2{8, 4, false};
  Mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(gelu(fc1(x))); }
};

struct Block : nn::Module {
  Mlp mlp;
  Block() { register_module("mlp", mlp); }
  Tensor forward(const Tensor& x) override { return x + mlp(x); }
};

// The blocks live in a ModuleList and the net calls them itself, so a block's name
// ("blocks.1") is found below the caller, not among its children.
struct Net : nn::Module {
  nn::ModuleList blocks;
  explicit Net(int n) {
    for (int i = 0; i < n; ++i) blocks.add<Block>();
    register_module("blocks", blocks);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (nn::Module& b : blocks) h = b(h);
    return h;
  }
};

// One line per op a policy saw: "index/index_of_name name [in shapes] -> [out] @path".
std::string line(const OpInfo& op) {
  std::ostringstream os;
  os << op.index << "/" << op.index_of_name << " " << op.name;
  for (const utils::TensorInfo& t : op.inputs) os << " " << (t.defined ? shape_str(t.shape) : "-");
  os << " -> " << shape_str(op.output.shape) << " @" << op.module_path;
  return os.str();
}

utils::CheckpointPolicy recording(std::vector<std::string>& seen,
                                  CheckpointDecision answer = CheckpointDecision::PreferRecompute) {
  return [&seen, answer](const OpInfo& op) {
    if (!utils::is_recomputing()) seen.push_back(line(op));
    return answer;
  };
}

std::vector<std::vector<double>> grads(nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : m.parameters()) out.push_back(values(p.grad()));
  return out;
}

class CheckpointPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    manual_seed(0);
    utils::checkpoint_stats() = {};
  }
};

}  // namespace

TEST_F(CheckpointPolicy, SeesNamesShapesCountersAndModulePaths) {
  Net net(2);
  std::vector<std::string> seen;
  utils::CheckpointOptions options;
  options.policy = recording(seen);
  EXPECT_EQ(utils::checkpoint_modules<Block>(net, options), 2);
  sum(net(randn({3, 4}).requires_grad_())).backward();
  // Each block is a region of its own: the counters start again at 0, and count per name.
  // (weight.t() is a permute; matmul's third argument is the bias, left out.)
  const std::vector<std::string> expected = {
      "0/0 permute [8, 4] -> [4, 8] @blocks.0.mlp.fc1",     "1/0 matmul [3, 4] [4, 8] - -> [3, 8] @blocks.0.mlp.fc1",
      "2/0 gelu [3, 8] -> [3, 8] @blocks.0.mlp",            "3/1 permute [4, 8] -> [8, 4] @blocks.0.mlp.fc2",
      "4/1 matmul [3, 8] [8, 4] - -> [3, 4] @blocks.0.mlp.fc2", "5/0 add [3, 4] [3, 4] -> [3, 4] @blocks.0",
      "0/0 permute [8, 4] -> [4, 8] @blocks.1.mlp.fc1",     "1/0 matmul [3, 4] [4, 8] - -> [3, 8] @blocks.1.mlp.fc1",
      "2/0 gelu [3, 8] -> [3, 8] @blocks.1.mlp",            "3/1 permute [4, 8] -> [8, 4] @blocks.1.mlp.fc2",
      "4/1 matmul [3, 8] [8, 4] - -> [3, 4] @blocks.1.mlp.fc2", "5/0 add [3, 4] [3, 4] -> [3, 4] @blocks.1"};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(nn::current_module_path(), "");  // every call has ended
}

TEST_F(CheckpointPolicy, ModulePathsAreRelativeToTheOutermostCall) {
  Net net(2);
  std::vector<std::string> seen;
  utils::CheckpointOptions options;
  options.policy = recording(seen);
  // Called on its own, a block is the outermost module: its own ops are at "".
  sum(utils::checkpoint(net.blocks[1], randn({3, 4}).requires_grad_(), options)).backward();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0], "0/0 permute [8, 4] -> [4, 8] @mlp.fc1");
  EXPECT_EQ(seen[5], "5/0 add [3, 4] [3, 4] -> [3, 4] @");
  // A module its caller never registered is named by its type.
  nn::Linear stray(4, 4, false);
  seen.clear();
  auto fn = [&](const Tensor& x) { return stray(net.blocks[0](x)); };
  sum(utils::checkpoint(fn, randn({3, 4}).requires_grad_(), options)).backward();
  EXPECT_EQ(seen.back(), "7/2 matmul [3, 4] [4, 4] - -> [3, 4] @");  // stray is outermost here
  struct Holder : nn::Module {
    nn::Linear* other = nullptr;
    Tensor forward(const Tensor& x) override { return (*other)(x); }
  } holder;
  holder.other = &stray;
  seen.clear();
  sum(utils::checkpoint(holder, randn({3, 4}).requires_grad_(), options)).backward();
  EXPECT_EQ(seen.back(), "1/0 matmul [3, 4] [4, 4] - -> [3, 4] @(Linear)");
}

// Blocks checkpointed inside a checkpointed net run again when the net's region is recomputed,
// and their policy is asked again: under the forward's module calls and with the forward's
// counters, it is told the same as in the forward.
TEST_F(CheckpointPolicy, ARecomputeSeesTheForwardsPathsAndCounters) {
  struct Model : nn::Module {
    Net net{2};
    Model() { register_module("net", net); }
    Tensor forward(const Tensor& x) override { return net(x); }
  } model;
  std::vector<std::string> forward, recompute;
  utils::CheckpointOptions blocks;
  blocks.policy = [&](const OpInfo& op) {
    (utils::is_recomputing() ? recompute : forward).push_back(line(op));
    return CheckpointDecision::PreferRecompute;
  };
  EXPECT_EQ(utils::checkpoint_modules<Block>(model, blocks), 2);
  EXPECT_EQ(utils::checkpoint_modules<Net>(model), 1);  // the call wrapper runs Net's forward itself
  sum(model(randn({3, 4}).requires_grad_())).backward();
  ASSERT_EQ(forward.size(), 12u);
  EXPECT_EQ(forward[7], "1/0 matmul [3, 4] [4, 8] - -> [3, 8] @net.blocks.1.mlp.fc1");
  // The net's recompute stops once its last saved tensor is back (the second block's input):
  // the first block runs again, with the same paths and counters.
  ASSERT_GE(recompute.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(recompute.begin(), recompute.begin() + 6),
            std::vector<std::string>(forward.begin(), forward.begin() + 6));
}

// A layer with several inputs: its ops see every input's shape and the layer's path, whether the
// layer is checkpointed itself or runs inside a checkpointed parent.
struct Gate : nn::MultiInputModule<Gate> {
  nn::Linear proj{4, 4, false};
  Gate() { register_module("proj", proj); }
  Tensor forward(const Tensor& x, const Tensor& gate, double scale) {
    const Tensor g = sigmoid(gate);
    return proj(x) * g * scale;
  }
};

struct Gated : nn::Module {
  Gate gate;
  Gated() { register_module("gate", gate); }
  Tensor forward(const Tensor& x) override { return gate(x, sum(x, {-1}, true), 0.5); }
};

TEST_F(CheckpointPolicy, SeesEveryInputOfAMultiInputModule) {
  Gated net;
  std::vector<std::string> seen;
  utils::CheckpointOptions options;
  options.policy = recording(seen);
  EXPECT_EQ(utils::checkpoint_modules<Gate>(net, options), 1);
  sum(net(randn({3, 4}).requires_grad_())).backward();
  // (The sum outside is the parent's; `* scale` is an affine op.)
  const std::vector<std::string> expected = {
      "0/0 sigmoid [3, 1] -> [3, 1] @gate", "1/0 permute [4, 4] -> [4, 4] @gate.proj",
      "2/0 matmul [3, 4] [4, 4] - -> [3, 4] @gate.proj", "3/0 mul [3, 4] [3, 1] -> [3, 4] @gate",
      "4/0 affine [3, 4] -> [3, 4] @gate"};
  EXPECT_EQ(seen, expected);
}

// Note [Checkpoint policies]: an op in an inner region counts in the outer one too.
TEST_F(CheckpointPolicy, NestedRegionsCountThroughTheInnerOnes) {
  Tensor w = randn({4, 4}).requires_grad_();
  std::vector<std::string> outer_seen, inner_seen;
  utils::CheckpointOptions outer, inner;
  outer.policy = recording(outer_seen);
  inner.policy = recording(inner_seen);
  auto fn = [&](const Tensor& x) {
    Tensor h = matmul(x, w);                                                                   // outer 0
    h = utils::checkpoint([&](const Tensor& y) { return tanh(matmul(y, w)); }, h, inner);  // outer 1, 2
    return matmul(h, w);                                                                       // outer 3
  };
  sum(utils::checkpoint(fn, randn({2, 4}).requires_grad_(), outer)).backward();
  EXPECT_EQ(outer_seen, (std::vector<std::string>{"0/0 matmul [2, 4] [4, 4] - -> [2, 4] @",
                                                  "1/1 matmul [2, 4] [4, 4] - -> [2, 4] @",
                                                  "2/0 tanh [2, 4] -> [2, 4] @",
                                                  "3/2 matmul [2, 4] [4, 4] - -> [2, 4] @"}));
  EXPECT_EQ(inner_seen, (std::vector<std::string>{"0/0 matmul [2, 4] [4, 4] - -> [2, 4] @",
                                                  "1/0 tanh [2, 4] -> [2, 4] @"}));
}

// Note [Decision strengths]: a MUST beats a PREFER from either side; between equals the inner
// region decides.
TEST_F(CheckpointPolicy, MustBeatsPreferAcrossNestedRegions) {
  Tensor w = randn({4, 4}).requires_grad_();
  const Tensor x0 = randn({2, 4});
  auto run = [&](CheckpointDecision outer_says, CheckpointDecision inner_says) {
    utils::CheckpointOptions outer, inner;
    outer.policy = [outer_says](const OpInfo& op) {
      return op.name == "matmul" ? outer_says : CheckpointDecision::PreferRecompute;
    };
    inner.policy = [inner_says](const OpInfo& op) {
      return op.name == "matmul" ? inner_says : CheckpointDecision::PreferRecompute;
    };
    auto fn = [&](const Tensor& x) {
      return tanh(utils::checkpoint([&](const Tensor& y) { return tanh(matmul(y, w)); }, x, inner));
    };
    utils::checkpoint_stats() = {};
    w.set_grad(Tensor());
    sum(utils::checkpoint(fn, x0.detach().requires_grad_(), outer)).backward();
    return utils::checkpoint_stats().ops_replayed;  // the inner region's matmul, kept or not
  };
  using D = CheckpointDecision;
  EXPECT_EQ(run(D::MustSave, D::PreferRecompute), 1);
  EXPECT_EQ(run(D::PreferSave, D::PreferRecompute), 0);
  EXPECT_EQ(run(D::PreferRecompute, D::PreferSave), 1);
  EXPECT_EQ(run(D::MustRecompute, D::PreferSave), 0);
  EXPECT_EQ(run(D::MustRecompute, D::MustSave), 1);  // two MUSTs: the inner one
  EXPECT_EQ(run(D::MustSave, D::MustRecompute), 0);
}

TEST_F(CheckpointPolicy, MustSaveOnAnOpThatCannotBeReplayedIsAnError) {
  nn::Dropout drop(0.5);
  const Tensor x = randn({4, 4}).requires_grad_();
  utils::CheckpointOptions options;
  options.policy = [](const OpInfo& op) {
    return op.name == "dropout" ? CheckpointDecision::MustSave : CheckpointDecision::PreferRecompute;
  };
  expect_error([&] { utils::checkpoint(drop, x, options); },
               "a policy says MustSave for op 0 (dropout), but dropout saves a tensor it made itself");
  options.policy = [](const OpInfo& op) {
    return op.name == "dropout" ? CheckpointDecision::PreferSave : CheckpointDecision::PreferRecompute;
  };
  sum(utils::checkpoint(drop, x, options)).backward();  // recomputed instead
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 0);
}

// Every op is checked for replay now, also one that saved statistics of its own and has an
// optional argument left out (layer_norm without weight and bias).
TEST_F(CheckpointPolicy, OpsWithArgumentsLeftOutAreDescribed) {
  std::vector<std::string> seen;
  utils::CheckpointOptions options;
  options.policy = recording(seen, CheckpointDecision::PreferSave);
  const Tensor x = randn({2, 4}).requires_grad_();
  sum(utils::checkpoint([](const Tensor& in) { return layer_norm(in, {4}); }, x, options)).backward();
  EXPECT_EQ(seen, (std::vector<std::string>{"0/0 layer_norm [2, 4] - - -> [2, 4] @"}));
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 0);  // it saved its statistics: recomputed
}

TEST_F(CheckpointPolicy, APolicyOnTheOpNameStillWorks) {
  Tensor w = randn({4, 4}).requires_grad_();
  utils::CheckpointOptions options;
  options.policy = [](const std::string& op) { return op == "matmul"; };  // as before OpInfo
  sum(utils::checkpoint([&](const Tensor& x) { return tanh(matmul(x, w)); }, randn({2, 4}), options)).backward();
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 1);
  std::function<bool(const std::string&)> empty;
  options.policy = empty;
  expect_error([&] { utils::checkpoint([&](const Tensor& x) { return x; }, randn({2}), options); },
               "[checkpoint] the policy is empty");
}

TEST_F(CheckpointPolicy, ReadyMadePoliciesChooseTheirOps) {
  auto decide = [](const utils::CheckpointPolicy& p, const std::string& name, int64_t index_of_name,
                   const std::string& path) {
    OpInfo op;
    op.name = name;
    op.index_of_name = index_of_name;
    op.module_path = path;
    return utils::is_save(p(op));
  };
  EXPECT_FALSE(decide(utils::recompute_all(), "matmul", 0, ""));
  EXPECT_TRUE(decide(utils::save_matmuls(), "conv2d", 0, ""));
  EXPECT_TRUE(decide(utils::save_attention(), "scaled_softmax", 0, ""));
  EXPECT_TRUE(decide(utils::save_attention(), "softmax", 0, ""));
  EXPECT_FALSE(decide(utils::save_attention(), "matmul", 0, ""));
  const utils::CheckpointPolicy third = utils::save_every(3, "matmul");
  EXPECT_FALSE(decide(third, "matmul", 0, ""));
  EXPECT_TRUE(decide(third, "matmul", 2, ""));
  EXPECT_TRUE(decide(third, "matmul", 5, ""));
  EXPECT_FALSE(decide(third, "add", 2, ""));
  const utils::CheckpointPolicy attn = utils::save_modules("blocks.*.attn*");
  EXPECT_TRUE(decide(attn, "matmul", 0, "blocks.3.attn"));
  EXPECT_TRUE(decide(attn, "matmul", 0, "blocks.3.attn.qkv"));  // inside a matching module
  EXPECT_TRUE(decide(attn, "matmul", 0, "blocks.12.attn_norm"));
  EXPECT_FALSE(decide(attn, "matmul", 0, "blocks.3.mlp"));
  EXPECT_FALSE(decide(attn, "matmul", 0, "blocks.3"));
  EXPECT_FALSE(decide(attn, "matmul", 0, "head.blocks.3.attn"));
  EXPECT_FALSE(decide(attn, "matmul", 0, ""));
  std::ostringstream os;
  os << CheckpointDecision::MustSave << " " << CheckpointDecision::PreferRecompute;
  EXPECT_EQ(os.str(), "MustSave PreferRecompute");
  expect_error([] { utils::save_every(0, "matmul"); }, "[save_every] k must be at least 1, got 0 (for op matmul)");
  utils::CheckpointOptions options;
  options.policy = [](const OpInfo&) { return static_cast<CheckpointDecision>(42); };
  expect_error([&] { utils::checkpoint([](const Tensor& in) { return tanh(in); }, randn({2}).requires_grad_(), options); },
               "[checkpoint] the policy's decision for op 0 (tanh) is CheckpointDecision(42), none of the four");
  expect_error([] { utils::save_modules("blocks..attn"); }, "[save_modules] the pattern 'blocks..attn' has an empty name");
}

// Every ready-made policy (and one keeping every op) gives the plain run's gradients bit for bit
// on transformer blocks, whose ops include all that the policies pick.
TEST_F(CheckpointPolicy, EveryReadyMadePolicyKeepsGradientsBitwise) {
  struct Gpt : nn::Module {
    nn::ModuleList blocks;
    Gpt() {
      for (int i = 0; i < 3; ++i) blocks.add<nn::TransformerBlock>(8, 2);
      register_module("blocks", blocks);
    }
    Tensor forward(const Tensor& x) override {
      Tensor h = x;
      for (nn::Module& b : blocks) h = b(h);
      return h;
    }
  };
  // The math path's attention: its weights are what save_attention keeps (the fused op saves no
  // [L, S] tensor, and what it saves of its own, the log-sum-exp, makes it one to recompute).
  AttentionBackendGuard math(AttentionBackend::Math);
  Gpt plain, ckpt;
  ckpt.load_state_dict(plain.state_dict());
  const Tensor x = randn({2, 5, 8});
  sum(plain(x)).backward();
  const std::vector<std::vector<double>> expected = grads(plain);
  struct Case {
    const char* name;
    utils::CheckpointPolicy policy;
    bool replays;
  };
  const std::vector<Case> cases = {
      {"recompute_all", utils::recompute_all(), false},
      {"save_matmuls", utils::save_matmuls(), true},
      {"save_attention", utils::save_attention(), true},
      {"save_every(2, matmul)", utils::save_every(2, "matmul"), true},
      {"save_modules(blocks.*.attn*)", utils::save_modules("blocks.*.attn*"), true},
      {"everything", [](const OpInfo&) { return CheckpointDecision::PreferSave; }, true},
  };
  for (const Case& c : cases) {
    utils::CheckpointOptions options;
    options.policy = c.policy;
    utils::uncheckpoint_modules(ckpt);
    EXPECT_EQ(utils::checkpoint_modules<nn::TransformerBlock>(ckpt, options), 3);
    ckpt.zero_grad();
    utils::checkpoint_stats() = {};
    sum(ckpt(x)).backward();
    EXPECT_EQ(utils::checkpoint_stats().recomputations, 3) << c.name;
    EXPECT_EQ(utils::checkpoint_stats().ops_replayed > 0, c.replays) << c.name;
    EXPECT_EQ(grads(ckpt), expected) << c.name;
  }
}

// Keeping every op of a stack whose every op output is saved by some op (a bias-free Linear's
// matmul output is saved by the GELU after it, the GELU's by the next matmul) holds exactly what
// the plain run holds: the same peak, byte for byte, over forward and backward.
TEST_F(CheckpointPolicy, KeepingEveryOpCostsThePlainPeak) {
  constexpr int64_t kBatch = 512, kWidth = 32;
  nn::Sequential seq;
  for (int i = 0; i < 6; ++i) {
    seq.add<nn::Linear>(kWidth, kWidth, false);
    seq.add<nn::GELU>();
  }
  const Tensor x = randn({kBatch, kWidth}).requires_grad_();
  auto peak = [&](bool checkpointed) {
    seq.zero_grad();
    x.set_grad(Tensor());
    utils::CheckpointOptions options;
    options.policy = [](const OpInfo&) { return CheckpointDecision::MustSave; };
    const int64_t base = memory::stats().live_bytes;
    memory::reset_peak();
    sum(checkpointed ? utils::checkpoint(seq, x, options) : seq(x)).backward();
    return memory::stats().peak_bytes - base;
  };
  const int64_t plain = peak(false), kept = peak(true);
  EXPECT_EQ(kept, plain);
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 18);  // 6 transposes, 6 matmuls, 6 GELUs
  EXPECT_GT(plain, 6 * kBatch * kWidth * 4);              // it did hold the activations
}

// Note [Letting kept outputs go]: after a recompute in a backward without retain_graph the kept
// outputs are gone; a recompute that comes all the same runs every op, with the same gradients.
TEST_F(CheckpointPolicy, ARecomputeAfterTheKeptOutputsWentRunsEveryOp) {
  const Tensor w1 = randn({4, 4}), w2 = randn({4, 4}), x = randn({2, 4});
  auto run = [&](bool checkpointed) {
    Tensor a = w1.detach().requires_grad_(), b = w2.detach().requires_grad_();
    auto fn = [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{tanh(matmul(in[0], a)), exp(matmul(in[0], b))};
    };
    utils::CheckpointOptions options;
    options.policy = utils::save_matmuls();
    const std::vector<Tensor> out = checkpointed ? utils::checkpoint(fn, {x}, options) : fn({x});
    sum(out[0]).backward();                                // frees the first path's nodes
    sum(out[1]).backward(Tensor(), /*retain_graph=*/true);  // the second path's tensors are ready
    sum(out[1]).backward();                                // they were taken: a recompute
    return std::pair{values(a.grad()), values(b.grad())};
  };
  const auto plain = run(false), ckpt = run(true);
  EXPECT_EQ(ckpt.first, plain.first);
  EXPECT_EQ(ckpt.second, plain.second);
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 2);
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 2);  // the first recompute's matmuls only
}

// Note [Saved tensors not recomputed]: a view of a kept output is replayed, so the value check
// reads it in neither pass; what the recompute makes is fingerprinted in both.
TEST_F(CheckpointPolicy, KeptOutputsAreNotFingerprinted) {
  const Tensor w0 = randn({4, 4}), x = randn({3, 4});
  auto run = [&](bool checkpointed) {
    Tensor w = w0.detach().requires_grad_();
    auto fn = [&](const Tensor& in) {
      const Tensor h = matmul(in, w);  // kept; the product saves x and w, made before the region
      return exp(h * h);               // the product saves h twice, exp its output
    };
    utils::CheckpointOptions options;
    options.policy = utils::save_matmuls();
    sum(checkpointed ? utils::checkpoint(fn, x, options) : fn(x)).backward();
    return values(w.grad());
  };
  const std::vector<double> plain = run(false);
  EXPECT_EQ(run(true), plain);
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 1);
  EXPECT_EQ(utils::checkpoint_stats().tensors_packed, 5);
  EXPECT_EQ(utils::checkpoint_stats().fingerprints_taken, 2);  // exp's output, forward and recompute
  EXPECT_EQ(utils::checkpoint_stats().values_compared, 1);
}

// Once the kept outputs went, a recompute computes them: a retained node's view of one is
// compared with the forward's values, which it was fingerprinted for when the node first took it.
TEST_F(CheckpointPolicy, AfterTheKeptOutputsWentARecomputeIsStillChecked) {
  const Tensor w1 = randn({4, 4}), x = randn({2, 4}).requires_grad_();
  double scale = 1.0;  // captured by reference: the last recompute sees a changed value
  Tensor a = w1.detach().requires_grad_();
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor h = in[0] * scale;  // kept (it saves nothing), saved twice by the square
    return std::vector<Tensor>{tanh(matmul(in[0], a)), h * h};
  };
  utils::CheckpointOptions options;
  options.policy = [](const OpInfo& op) {
    return op.index == 0 ? CheckpointDecision::PreferSave : CheckpointDecision::PreferRecompute;
  };
  const std::vector<Tensor> out = utils::checkpoint(fn, {x}, options);
  sum(out[0]).backward();                                // recomputes, then lets the kept outputs go
  sum(out[1]).backward(Tensor(), /*retain_graph=*/true);  // the square's node takes h and stays
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 1);
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 1);  // h was kept
  scale = 2.0;
  expect_error([&] { sum(out[1]).backward(); }, "(saved by mul, [2, 4]) holds other values than the forward saved");
}

TEST_F(CheckpointPolicy, WithRetainGraphEveryRecomputeReplays) {
  Tensor w = randn({4, 4}).requires_grad_();
  utils::CheckpointOptions options;
  options.policy = utils::save_matmuls();
  Tensor out = sum(utils::checkpoint([&](const Tensor& x) { return tanh(matmul(x, w)); }, randn({2, 4}), options));
  out.backward(Tensor(), /*retain_graph=*/true);
  const std::vector<double> once = values(w.grad());
  out.backward();
  EXPECT_EQ(utils::checkpoint_stats().recomputations, 2);
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, 2);
  std::vector<double> twice = once;
  for (double& g : twice) g *= 2;
  EXPECT_EQ(values(w.grad()), twice);
}

// Note [Planning per-op saves]: the knapsack by hand. Keeping the best work per byte first (A)
// would save 100; B and C together save 140 in the same budget. D cannot be replayed, E is a view.
TEST_F(CheckpointPolicy, PlanningPerOpSavesIsAnExactKnapsack) {
  auto op = [](int64_t index, const char* name, int64_t floats, int64_t flops, bool replayable = true) {
    OpInfo o;
    o.index = index;
    o.name = name;
    o.output.shape = {floats};
    o.flops = flops;
    o.replayable = replayable;
    o.saved = 1;  // as a matmul: so the recompute runs every op before the last
    return o;
  };
  const std::vector<OpInfo> ops = {op(0, "A", 60, 100), op(1, "B", 50, 70), op(2, "C", 50, 70),
                                   op(3, "D", 1, 1000, false), op(4, "E", 50, 0)};
  utils::OpPlan plan = utils::plan_op_saves(ops, 400);
  EXPECT_EQ(plan.str(), "keep 1 B, 1 C: 400 bytes, 140 of 1240 flops saved");
  EXPECT_EQ(plan.recompute_flops, 1100);
  EXPECT_EQ(utils::plan_op_saves(ops, 399).str(), "keep 1 A: 240 bytes, 100 of 1240 flops saved");
  EXPECT_EQ(utils::plan_op_saves(ops, 0).str(), "keep nothing: 0 bytes, 0 of 1240 flops saved");
  EXPECT_EQ(utils::plan_op_saves(ops, 1 << 20).kept.size(), 3u);  // A, B, C: all that can help

  // What the base insists on is taken first and counts against the budget; what it forbids is left.
  auto insist = [](const char* name, CheckpointDecision d) {
    return utils::CheckpointPolicy([name = std::string(name), d](const OpInfo& o) {
      return o.name == name ? d : CheckpointDecision::PreferRecompute;
    });
  };
  EXPECT_EQ(utils::plan_op_saves(ops, 400, insist("A", CheckpointDecision::MustSave)).str(),
            "keep 1 A: 240 bytes, 100 of 1240 flops saved");
  EXPECT_EQ(utils::plan_op_saves(ops, 440, insist("B", CheckpointDecision::MustRecompute)).str(),
            "keep 1 A, 1 C: 440 bytes, 170 of 1240 flops saved");
  expect_error([&] { utils::plan_op_saves(ops, 100, insist("A", CheckpointDecision::MustSave)); },
               "[plan_op_saves] the base policy's MustSave ops keep 240 bytes, more than the budget of 100");
  expect_error([&] { utils::plan_op_saves(ops, 100, insist("D", CheckpointDecision::MustSave)); },
               "the base policy says MustSave for op 3 (D), which cannot be replayed");
  // The plan as a policy: its ops by index and name, the base's MUSTs as they are.
  const utils::CheckpointPolicy planned = utils::planned_policy(plan, insist("D", CheckpointDecision::MustRecompute));
  EXPECT_EQ(planned(ops[1]), CheckpointDecision::PreferSave);
  EXPECT_EQ(planned(ops[0]), CheckpointDecision::PreferRecompute);
  EXPECT_EQ(planned(ops[3]), CheckpointDecision::MustRecompute);
  OpInfo renamed = ops[1];
  renamed.name = "other";  // another region's op at that index
  EXPECT_EQ(planned(renamed), CheckpointDecision::PreferRecompute);
  // Hand-made ops are checked before the knapsack adds them up.
  expect_error([&] { utils::plan_op_saves({op(0, "A", 60, -1)}, 400); }, "[plan_op_saves] op 0 (A) has negative work (-1)");
  expect_error([&] { utils::plan_op_saves({op(0, "A", INT64_MAX / 2, 100)}, 400); },
               "[TensorInfo] shape [4611686018427387903] is too large: 4611686018427387903 * 4 overflows int64");
  expect_error([&] { utils::plan_op_saves({op(0, "A", int64_t{1} << 58, 100), op(1, "B", int64_t{1} << 58, 100)}, 400); },
               "the ops' outputs add up to more than 2^60 bytes or operations");
}

// On a transformer block: the profile gives every op's work, the plan keeps what fits, the
// forward then holds no more than the plan's bytes, and the gradients are the plain ones.
TEST_F(CheckpointPolicy, APlannedPolicyOnATransformerBlock) {
  AttentionBackendGuard math(AttentionBackend::Math);  // the figures below are the math path's ops
  nn::TransformerBlock plain(16, 2), ckpt(16, 2);
  ckpt.load_state_dict(plain.state_dict());
  const Tensor x = randn({2, 8, 16});
  const std::vector<OpInfo> ops = utils::profile_ops(ckpt, x);
  ASSERT_GT(ops.size(), 10u);
  int64_t all_bytes = 0;
  for (const OpInfo& op : ops)
    if (op.replayable && op.flops > 0) all_bytes += op.output.nbytes();
  // The work the recompute does: every op's but the last matmul's (it saves its inputs before it
  // computes, and the recompute stops there) and the residual add's after it.
  const int64_t total_flops = utils::plan_op_saves(ops, 0).recompute_flops;
  EXPECT_EQ(total_flops, 274944);
  EXPECT_EQ(utils::checkpoint_stats().forwards, 1);  // the profile ran one checkpointed forward
  const utils::OpPlan plan = utils::plan_op_saves(ops, all_bytes / 3);
  EXPECT_LE(plan.kept_bytes, all_bytes / 3);
  EXPECT_GT(plan.saved_flops, 0);
  EXPECT_EQ(plan.saved_flops + plan.recompute_flops, total_flops);
  EXPECT_GE(plan.saved_flops, utils::plan_op_saves(ops, all_bytes / 4).saved_flops);  // more budget, no less saved

  auto held_after_forward = [&](const utils::CheckpointPolicy& policy) {
    utils::CheckpointOptions options;
    options.policy = policy;
    const int64_t base = memory::stats().live_bytes;
    Tensor out = utils::checkpoint(ckpt, x, options);
    return memory::stats().live_bytes - base;
  };
  const int64_t extra = held_after_forward(utils::planned_policy(plan)) - held_after_forward(utils::recompute_all());
  // Exactly the plan's bytes: it keeps four matmul outputs, none of them the block's output
  // (which the caller holds anyway).
  EXPECT_EQ(plan.str(), "keep 4 matmul: 6144 bytes, 99840 of 274944 flops saved");
  EXPECT_EQ(extra, plan.kept_bytes);

  sum(plain(x)).backward();
  utils::CheckpointOptions options;
  options.policy = utils::planned_policy(plan);
  utils::checkpoint_stats() = {};
  sum(utils::checkpoint(ckpt, x, options)).backward();
  EXPECT_EQ(utils::checkpoint_stats().ops_replayed, static_cast<int64_t>(plan.kept.size()));
  EXPECT_EQ(grads(ckpt), grads(plain));
}
