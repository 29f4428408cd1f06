// Note [Non-reentrant checkpointing]
// checkpoint(fn, inputs) runs fn normally — the autograd graph is built as usual, so gradients
// reach the inputs and every parameter fn touches — but under saved-tensor hooks (Note
// [Saved-tensor hooks]) whose pack step keeps only a Handle {frame, index} and a description of
// the tensor (shape, dtype, device, the op that saved it). The activations themselves are freed
// as soon as the forward no longer needs them.
//
// In backward, the first node that unpacks a Handle triggers Frame::recompute(): it restores the
// generator states captured before the forward (so Dropout draws the same masks) and the
// forward's autocast state (so the recompute computes in the forward's dtypes), marks the
// thread as recomputing (so BatchNorm leaves its running statistics alone), and runs fn again on
// the saved inputs under a second hook that fills the frame's entries in save order, checking
// each against the forward's description. As soon as the last entry is filled the hook throws
// StopRecompute: whatever fn would still compute after its last saved tensor is never run (early
// stop). Each unpack moves its tensor out of the frame, so a recomputed activation lives only
// until the node that needed it has run; a second backward (retain_graph) recomputes again.
//
// The inputs are kept in SavedTensors, created under whatever hooks were active outside: that
// gives them the in-place version check, and makes nesting work — an inner checkpoint's inputs
// are packed by the outer checkpoint and recomputed by it when the inner one needs them.
//
// Note [Checking the recompute]
// A recompute that does not reproduce the forward would give a silently wrong gradient, so by
// default (determinism_check) each recomputed saved tensor is compared with what the forward
// saved before it is used: its shape, dtype and device, and — check_values — its values, through
// a 64-bit fingerprint (Note [Tensor fingerprints]) taken in the forward's pack hook and again in
// the recompute's. That costs one read of every saved tensor in each pass, and 8 bytes an entry
// (bench/RESULTS.md has the measured cost); the tensors themselves are not kept. The fingerprint
// is exact, not a tolerance: ember's kernels are deterministic, so an honest recompute gives the
// same bits. Debug mode also fingerprints every op's output, to name the first op that differs.
//
// Note [Selective checkpointing]
// With a policy, an op observer (Note [Op observers]) records every top-level op of the forward.
// For ops the policy keeps, it holds the op's output and remembers, for each tensor the op saved,
// whether it was one of the op's arguments or its output. In the recompute those ops are not
// run: the observer returns the kept output and fills their saved tensors from the recompute's
// arguments. An op that saved anything else (a mask, statistics) cannot be replayed that way and
// is recomputed like the rest.
#include "utils/checkpoint.h"

#include <any>
#include <memory>
#include <optional>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/graph_region.h"
#include "core/autograd/op_observer.h"
#include "core/autocast.h"
#include "core/autograd/recompute.h"
#include "core/autograd/saved_tensor.h"
#include "core/generator.h"
#include "core/ops.h"

namespace ember::utils {

CheckpointPolicy recompute_all() {
  return [](const std::string&) { return false; };
}

CheckpointPolicy save_matmuls() {
  return [](const std::string& op) { return op == "matmul" || op == "conv2d"; };
}

bool is_recomputing() { return autograd::is_recomputing(); }

CheckpointStats& checkpoint_stats() {
  static thread_local CheckpointStats stats;
  return stats;
}

namespace {

struct StopRecompute {};

#define EMBER_CHECKPOINT_FAIL(...) \
  throw CheckpointError(::ember::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

bool same_view(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() == b.storage() && a.offset() == b.offset() &&
         a.shape() == b.shape() && a.strides() == b.strides();
}

// What a saved tensor looked like in the forward, and its recomputed value until unpacked.
struct Entry {
  Shape shape;
  DType dtype;
  Device device;
  std::string op;
  uint64_t fingerprint = 0;  // when the options check values
  Tensor value;
  bool ready = false;
};

// An op of the forward, and what the policy kept of it.
struct OpRecord {
  std::string name;
  bool kept = false;
  Tensor output;  // detached
  bool output_requires_grad = false;
  std::vector<int> saves;       // per saved tensor: the argument it aliases, or -1 for the output
  std::vector<Tensor> pending;  // saved during the op, resolved into `saves` when it ends
  std::vector<Tensor> args;
  uint64_t output_fingerprint = 0;  // debug mode
};

// Note [One fingerprint per saved view]
// Ops save the same view more than once: attention's weights are saved by the softmax (its
// output) and by the product with v (its input), and they are the largest tensor a block saves.
// The value check fingerprints the view once and reuses the result while the view is unchanged:
// the same storage, still alive (the memo holds it weakly, so it keeps no memory alive and freed
// memory reused by another tensor cannot match), the same element 0, shape, strides and dtype,
// and the same version (no in-place write since). The last few views are remembered, enough for
// an op's saves and the next op's.
struct FingerprintMemo {
  struct Seen {
    std::weak_ptr<Storage> storage;
    const void* data;
    Shape shape, strides;
    DType dtype;
    uint64_t version, fingerprint;
  };
  static constexpr size_t kRemembered = 4;
  std::vector<Seen> seen;  // the most recent last

  uint64_t of(const Tensor& t) {
    for (const Seen& s : seen)
      if (s.storage.lock() == t.storage() && s.data == t.raw_data() && s.shape == t.shape() &&
          s.strides == t.strides() && s.dtype == t.dtype() && s.version == t.version())
        return s.fingerprint;
    const uint64_t f = fingerprint(t);
    if (seen.size() == kRemembered) seen.erase(seen.begin());
    seen.push_back({t.storage(), t.raw_data(), t.shape(), t.strides(), t.dtype(), t.version(), f});
    return f;
  }
};

struct Frame {
  MultiFunction fn;
  CheckpointOptions options;
  std::vector<autograd::SavedTensor> inputs;
  std::vector<bool> input_requires_grad;
  std::vector<std::pair<Device, GeneratorState>> rng;
  AutocastSnapshot autocast;  // the forward's, which the recompute runs under (Note [Autocast])
  std::vector<Entry> entries;
  std::vector<OpRecord> ops;
  int current_op = -1;                  // forward: the op being recorded
  const char* recomputing_op = nullptr;  // recompute: the op running now
  FingerprintMemo fingerprints;          // the value check's, forward and recompute

  bool checks_values() const { return options.debug || (options.determinism_check && options.check_values); }
  Tensor take(size_t index);
  void recompute();
  void fill(size_t& next, const Tensor& t);
};

struct Handle {
  std::shared_ptr<Frame> frame;
  size_t index;
};

// Forward: records ops and, for ops the policy keeps, their outputs and saved tensors.
struct Recorder final : autograd::OpObserver {
  explicit Recorder(Frame& f) : frame(f) {}
  std::optional<Tensor> before(const char* op, const std::vector<Tensor>& args) override {
    frame.current_op = static_cast<int>(frame.ops.size());
    OpRecord& r = frame.ops.emplace_back();
    r.name = op;
    r.kept = frame.options.policy(op);
    if (r.kept) r.args = args;
    return std::nullopt;
  }
  void after(const char*, const Tensor& output) override {
    OpRecord& r = frame.ops[static_cast<size_t>(frame.current_op)];
    frame.current_op = -1;
    if (frame.options.debug) r.output_fingerprint = fingerprint(output);
    if (!r.kept) return;
    for (const Tensor& saved : r.pending) {
      int source = same_view(saved, output) ? -1 : -2;
      for (size_t i = 0; i < r.args.size() && source == -2; ++i)
        if (same_view(saved, r.args[i].detach())) source = static_cast<int>(i);
      if (source == -2) {  // saved something it made itself: not replayable
        r.kept = false;
        break;
      }
      r.saves.push_back(source);
    }
    r.pending.clear();
    r.args.clear();
    if (!r.kept) {
      r.saves.clear();
      return;
    }
    r.output = output.detach();
    r.output_requires_grad = output.requires_grad();
  }
  Frame& frame;
};

// Recompute: replays the kept ops instead of running them.
struct Replayer final : autograd::OpObserver {
  Replayer(Frame& f, size_t& next) : frame(f), next(next) {}
  std::optional<Tensor> before(const char* op, const std::vector<Tensor>& args) override {
    const size_t index = op_index++;
    if (index >= frame.ops.size() || frame.ops[index].name != op)
      EMBER_CHECKPOINT_FAIL("[checkpoint] op ", index, " of the recompute is ", op, " but the forward ran ",
                            index < frame.ops.size() ? frame.ops[index].name : "nothing there",
                            ": the checkpointed function does not run the same ops twice");
    const OpRecord& r = frame.ops[index];
    if (!r.kept) {
      frame.recomputing_op = op;
      return std::nullopt;
    }
    Tensor out = r.output.detach();
    if (r.output_requires_grad) out.requires_grad_();
    ++checkpoint_stats().ops_replayed;
    for (int source : r.saves) frame.fill(next, source < 0 ? out : args[static_cast<size_t>(source)].detach());
    return out;
  }
  void after(const char* op, const Tensor& output) override {
    frame.recomputing_op = nullptr;
    if (!frame.options.debug) return;
    const OpRecord& r = frame.ops[op_index - 1];
    const uint64_t f = fingerprint(output);
    if (f != r.output_fingerprint)
      EMBER_CHECKPOINT_FAIL("[checkpoint] the first op whose recomputed output differs from the forward's is ", op,
                            " (op ", op_index - 1, ", fingerprint ", f, " vs ", r.output_fingerprint, ")");
  }
  Frame& frame;
  size_t& next;
  size_t op_index = 0;
};

void Frame::fill(size_t& next, const Tensor& t) {
  if (next >= entries.size())
    EMBER_CHECKPOINT_FAIL("[checkpoint] the recompute saved more tensors than the forward (", entries.size(),
                          "): the checkpointed function is not deterministic");
  Entry& e = entries[next];
  if (options.determinism_check) {
    const char* what = t.shape() != e.shape ? "shape" : t.dtype() != e.dtype ? "dtype" : t.device() != e.device ? "device" : nullptr;
    if (what)
      EMBER_CHECKPOINT_FAIL("[checkpoint] recomputed tensor ", next, " (saved by ", e.op, ") has ", what, " ",
                            shape_str(t.shape()), " ", t.dtype(), " on ", t.device(), " but the forward saved ",
                            shape_str(e.shape), " ", e.dtype, " on ", e.device);
  }
  if (checks_values()) {
    const uint64_t f = fingerprints.of(t);
    if (f != e.fingerprint && options.debug)
      EMBER_CHECKPOINT_FAIL("[checkpoint] the first op whose recomputed output differs from the forward's is ",
                            recomputing_op ? recomputing_op : e.op.c_str(), " (recomputed tensor ", next,
                            ", saved by ", e.op, ": fingerprint ", f, " vs ", e.fingerprint, ")");
    if (f != e.fingerprint)
      EMBER_CHECKPOINT_FAIL("[checkpoint] recomputed tensor ", next, " (saved by ", e.op, ", ", shape_str(t.shape()),
                            ") holds other values than the forward saved (fingerprint ", f, " vs ", e.fingerprint,
                            "): the checkpointed function is not deterministic (a random op without "
                            "preserve_rng_state? state that changed between forward and backward?). debug = true "
                            "names the first op whose output differs; check_values = false skips this check");
  }
  e.value = t;
  e.ready = true;
  if (++next == entries.size()) throw StopRecompute{};
}

void Frame::recompute() {
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = inputs[i].unpack();  // throws if an input was modified in place since the forward
    if (t.defined()) {
      t = t.detach();
      if (input_requires_grad[i]) t.requires_grad_();
    }
    args.push_back(t);
  }
  RngStateGuard callers_generators;
  if (options.preserve_rng_state) set_rng_states(rng);
  AutocastRestore forwards_autocast(autocast);
  autograd::RecomputeGuard recomputing;
  EnableGradGuard grad_on;  // the ops must record (and so save) exactly as in the forward
  size_t next = 0;
  Replayer replayer(*this, next);
  autograd::OpObserverGuard observe(&replayer);
  autograd::SavedTensorHooksGuard hooks({[&](const Tensor& t) -> std::any {
                                           fill(next, t);
                                           return {};
                                         },
                                         [](const std::any&) -> Tensor {
                                           EMBER_FAIL("[checkpoint] a tensor saved during a recompute was unpacked");
                                         }});
  ++checkpoint_stats().recomputations;
  try {
    fn(args);
  } catch (const StopRecompute&) {
    ++checkpoint_stats().early_stops;
    return;
  }
  EMBER_CHECKPOINT_FAIL("[checkpoint] the recompute saved ", next, " tensor(s) but the forward saved ", entries.size(),
                        ": the checkpointed function is not deterministic in the ops it runs");
}

Tensor Frame::take(size_t index) {
  if (!entries[index].ready) recompute();
  Entry& e = entries[index];
  e.ready = false;
  return std::move(e.value);
}

}  // namespace

std::vector<Tensor> checkpoint(const MultiFunction& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  EMBER_CHECK(fn, "[checkpoint] the function is empty");
  EMBER_CHECK(options.policy, "[checkpoint] the policy is empty (use utils::recompute_all())");
  if (!is_grad_enabled()) return fn(inputs);  // no backward will come: nothing to drop or recompute

  auto frame = std::make_shared<Frame>();
  frame->fn = fn;
  frame->options = options;
  for (const Tensor& t : inputs) {
    frame->inputs.emplace_back(t, "checkpoint");
    frame->input_requires_grad.push_back(t.defined() && t.requires_grad());
  }
  if (options.preserve_rng_state) frame->rng = get_rng_states();
  frame->autocast = autocast_snapshot();
  // Note [Checkpointed casts skip the cache]
  // Autocast's cast cache (Note [Autocast]) lives until the outermost region ends, so whether a
  // weight's cast is a cache hit depends on what ran before: a hit in the forward (the weight was
  // cast before the checkpoint, by a profile or a first use) can be a miss in the recompute (the
  // region has ended) or the other way round, and the two passes would run different ops. So
  // the forward and the recompute of a checkpointed region both run with the cache off: each
  // casts its weights itself, and the value check sees the same ops. A weight used once in the
  // region gets the same gradient bits as with the cache; one used several times gets the sum of
  // its uses' float32 gradients instead of the float32 of their 16-bit sum.
  for (AutocastSnapshot::Device& d : frame->autocast.devices) d.cache_enabled = false;
  const AutocastRestore forward_without_cast_cache(frame->autocast);

  Recorder recorder(*frame);
  std::vector<Tensor> outputs;
  {
    autograd::GraphRegionGuard region("checkpoint");  // for the pictures: Note [Graph regions]
    autograd::OpObserverGuard observe(&recorder);
    autograd::SavedTensorHooksGuard hooks(
        {[frame](const Tensor& t) -> std::any {
           Entry& e = frame->entries.emplace_back();
           e.shape = t.shape();
           e.dtype = t.dtype();
           e.device = t.device();
           e.op = autograd::saving_op_name();
           if (frame->checks_values()) e.fingerprint = frame->fingerprints.of(t);
           if (frame->current_op >= 0 && frame->ops[static_cast<size_t>(frame->current_op)].kept)
             frame->ops[static_cast<size_t>(frame->current_op)].pending.push_back(t);
           ++checkpoint_stats().tensors_packed;
           return Handle{frame, frame->entries.size() - 1};
         },
         [](const std::any& packed) -> Tensor {
           const auto& h = std::any_cast<const Handle&>(packed);
           return h.frame->take(h.index);
         }});
    outputs = fn(inputs);
  }
  ++checkpoint_stats().forwards;
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options) {
  EMBER_CHECK(fn, "[checkpoint] the function is empty");
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
                    std::vector<Tensor>{input}, options)[0];
}

Tensor checkpoint(nn::Module& module, const Tensor& input, const CheckpointOptions& options) {
  return checkpoint([&module](const Tensor& x) { return module.forward(x); }, input, options);
}

}  // namespace ember::utils
