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
// Note [Selective checkpointing]
// With a policy, an op observer (Note [Op observers]) records every top-level op of the forward.
// For ops the policy keeps, it holds the op's output and remembers, for each tensor the op saved,
// whether it was one of the op's arguments or its output. In the recompute those ops are not
// run: the observer returns the kept output and fills their saved tensors from the recompute's
// arguments. An op that saved anything else (a mask, statistics) cannot be replayed that way and
// is recomputed like the rest.
//
// Note [Checkpoint policies]
// The policy is asked once the op has run, so that it sees the output's shape as well as the
// arguments': while the op runs the Recorder holds its arguments and the tensors it saves (both
// alive then anyway) and lets them go in after(). It gets an OpInfo: the op's name, the shapes,
// dtypes and devices, the module it runs in (Note [Module paths]) and its position in the
// region. Regions nest, and an op inside an inner region is inside the outer one too, so each
// region running on the thread has a PolicyScope on a thread-local stack with its policy and its
// counters, and every op counts in every region around it: the outer region's counters go on
// through the inner region's ops, and `index` means the same for one policy wherever it is used.
// The recompute pushes a scope of its own and counts the ops it replays or runs, so a region
// nested in it sees the counters of the forward.
//
// Note [Decision strengths]
// Every region around an op is asked about it, the outermost first, and the answers combine:
// a MUST beats a PREFER whichever region gives it, and between two answers of the same
// strength the innermost region's wins. So a region nested in another decides its own ops (the
// ready-made policies all PREFER), unless the outer policy insists: an outer MustSave of the
// matmuls keeps them in every block checkpointed inside it, whatever the blocks' own policies
// prefer, and an outer MustRecompute keeps memory free whatever they prefer. A MUST is also a
// promise: MustSave on an op that cannot be replayed (it saved a mask or statistics of its own,
// Note [Selective checkpointing]) is a CheckpointError naming the op, where PreferSave quietly
// recomputes it. (The budget planner may override what a policy prefers, never what it insists
// on.)
#include "utils/checkpoint.h"

#include <any>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/graph_region.h"
#include "core/autograd/op_observer.h"
#include "core/autocast.h"
#include "core/autograd/recompute.h"
#include "core/autograd/saved_tensor.h"
#include "core/generator.h"
#include "core/ops.h"
#include "nn/module_path.h"
#include "utils/checkpoint_frame.h"
#include "utils/layer_profile.h"

namespace ember::utils {

using namespace checkpoint_detail;  // the Frame and what it records (utils/checkpoint_frame.h)

bool is_recomputing() { return autograd::is_recomputing(); }

CheckpointStats& checkpoint_stats() {
  static thread_local CheckpointStats stats;
  return stats;
}

namespace {

struct StopRecompute {};

bool same_view(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() == b.storage() && a.offset() == b.offset() &&
         a.shape() == b.shape() && a.strides() == b.strides();
}

// A region whose forward or recompute runs on this thread (Note [Checkpoint policies]).
struct PolicyScope {
  const CheckpointPolicy& policy;
  int64_t ops = 0;
  std::unordered_map<std::string, int64_t> ops_by_name;
};
thread_local std::vector<PolicyScope*> policy_scopes;  // the outermost first

// The serial of the first storage made inside the outermost region, forward or recompute,
// running on this thread; 0 while none is (Note [Saved tensors not recomputed]).
thread_local uint64_t region_first_serial = 0;

class OutermostRegionGuard {
 public:
  OutermostRegionGuard() : outer_(region_first_serial) {
    if (!outer_) region_first_serial = Storage::next_serial();
  }
  ~OutermostRegionGuard() { region_first_serial = outer_; }
  OutermostRegionGuard(const OutermostRegionGuard&) = delete;
  OutermostRegionGuard& operator=(const OutermostRegionGuard&) = delete;

 private:
  uint64_t outer_;
};

class PolicyScopeGuard {
 public:
  explicit PolicyScopeGuard(const CheckpointPolicy& policy) : scope_{policy, 0, {}} { policy_scopes.push_back(&scope_); }
  ~PolicyScopeGuard() { policy_scopes.pop_back(); }
  PolicyScopeGuard(const PolicyScopeGuard&) = delete;
  PolicyScopeGuard& operator=(const PolicyScopeGuard&) = delete;

 private:
  PolicyScope scope_;
};

// Counts op `name` in every region around it and, given the op's info, combines the regions'
// decisions (Note [Decision strengths]).
std::optional<CheckpointDecision> count_op(const char* name, OpInfo* info) {
  std::optional<CheckpointDecision> must, innermost;
  for (PolicyScope* scope : policy_scopes) {
    const int64_t index = scope->ops++, index_of_name = scope->ops_by_name[name]++;
    if (!info) continue;
    info->index = index;
    info->index_of_name = index_of_name;
    innermost = scope->policy(*info);
    EMBER_CHECK(is_must(*innermost) || is_save(*innermost) || *innermost == CheckpointDecision::PreferRecompute,
                "[checkpoint] the policy's decision for op ", info->index, " (", name, ") is ", *innermost,
                ", none of the four CheckpointDecisions");
    if (is_must(*innermost)) must = innermost;
  }
  return must ? must : innermost;
}

TensorInfo describe(const Tensor& t) {
  if (!t.defined()) return {Shape{}, kFloat32, Device{}, false};
  return {t.shape(), t.dtype(), t.device(), true};
}

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
    r.args = ArgumentsBefore::of(args);
    return std::nullopt;
  }
  void after(const char* op, const Tensor& output) override {
    OpRecord& r = frame.ops[static_cast<size_t>(frame.current_op)];
    frame.current_op = -1;
    if (frame.options.debug) r.output_fingerprint = fingerprint(output);
    OpInfo info;
    info.name = op;
    for (const Tensor& a : r.args.tensors) info.inputs.push_back(describe(a));
    info.output = describe(output);
    info.module_path = nn::current_module_path();
    info.saved = static_cast<int64_t>(r.pending.size());
    for (const Tensor& saved : r.pending) info.saved_output |= same_view(saved, output);
    info.replayable = replayable(r, output);
    info.flops = estimated_flops(op, r.args.tensors, output, r.args.written_over(output));
    const CheckpointDecision decision = *count_op(op, &info);
    r.kept = is_save(decision) && info.replayable;
    if (is_save(decision) && !r.kept && is_must(decision))
      EMBER_CHECKPOINT_FAIL("[checkpoint] a policy says MustSave for op ", info.index, " (", op, info.module_path.empty() ? "" : " in ",
                            info.module_path, "), but ", op, " saves a tensor it made itself (a mask or statistics), "
                            "so its output cannot be replayed: PreferSave recomputes such ops instead");
    if (r.kept && made_its_output(r, output)) frame.kept_storages.insert(output.storage().get());
    for (size_t i = 0; i < r.pending_entries.size(); ++i) frame.choose_value_check(frame.entries[r.pending_entries[i]], r.pending[i]);
    r.pending.clear();
    r.pending_entries.clear();
    r.args = {};
    if (!r.kept) {
      r.saves.clear();
      return;
    }
    r.output = output.detach();
    r.output_requires_grad = output.requires_grad();
  }
  // Whether the output is of a storage of its own, not a view of an argument (or the argument,
  // written in place): only then does every view of that storage come from the replay.
  static bool made_its_output(const OpRecord& r, const Tensor& output) {
    if (!output.defined()) return false;
    for (const Tensor& a : r.args.tensors)
      if (a.defined() && a.storage() == output.storage()) return false;
    return true;
  }
  // Works out, for each tensor the op saved, which argument it is, or its output (Note [Selective
  // checkpointing]); false if it saved something else.
  static bool replayable(OpRecord& r, const Tensor& output) {
    for (const Tensor& saved : r.pending) {
      int source = same_view(saved, output) ? -1 : -2;
      for (size_t i = 0; i < r.args.tensors.size() && source == -2; ++i)
        if (same_view(saved, r.args.tensors[i])) source = static_cast<int>(i);
      if (source == -2) return false;
      r.saves.push_back(source);
    }
    return true;
  }
  Frame& frame;
};

// Recompute: replays the kept ops instead of running them.
struct Replayer final : autograd::OpObserver {
  Replayer(Frame& f, size_t& next) : frame(f), next(next) {}
  std::optional<Tensor> before(const char* op, const std::vector<Tensor>& args) override {
    const size_t index = op_index++;
    count_op(op, nullptr);
    if (index >= frame.ops.size() || frame.ops[index].name != op)
      EMBER_CHECKPOINT_FAIL("[checkpoint] op ", index, " of the recompute is ", op, " but the forward ran ",
                            index < frame.ops.size() ? frame.ops[index].name : "nothing there",
                            ": the checkpointed function does not run the same ops twice");
    const OpRecord& r = frame.ops[index];
    if (!r.kept || frame.kept_let_go) {
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

}  // namespace

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
  if (checks_values() && !e.saved.is(t)) check_value(e, next, t);
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
  nn::ModuleCallsRestore forwards_module_calls(module_calls);
  PolicyScopeGuard counting(options.policy);
  OutermostRegionGuard outermost;
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
    let_go_of_kept_outputs();
    return;
  }
  EMBER_CHECKPOINT_FAIL("[checkpoint] the recompute saved ", next, " tensor(s) but the forward saved ", entries.size(),
                        ": the checkpointed function is not deterministic in the ops it runs");
}

// Note [Letting kept outputs go]
// A policy's kept outputs are what a recompute replays, so they stay as long as a recompute may
// come. Once one has run inside a backward that frees its nodes' saved tensors (no
// retain_graph), none will come in the ordinary course: every entry now holds its tensor, and
// each node that takes one frees its handle after running. So the kept outputs go then, and each
// replayed tensor lives only as long as the entries holding it, as it would have without
// checkpointing: a region that keeps every op holds what the plain run holds, no more, in backward
// as in the forward. Should a recompute come all the same (a later backward with retain_graph
// over nodes that this one did not run, a node unpacking one tensor twice), it runs every op
// again instead of replaying: slower, never wrong.
void Frame::let_go_of_kept_outputs() {
  if (!autograd::backward_frees_graph()) return;
  for (OpRecord& r : ops) r.output = Tensor();
  kept_let_go = true;
}

Tensor Frame::take(size_t index) {
  if (!entries[index].ready) recompute();
  Entry& e = entries[index];
  // A retained node will take this again, and once the kept outputs are gone the recompute that
  // brings it back computes it instead of replaying it: keep what to compare that with.
  if (e.known_by == KnownBy::kept_output && kept_let_go && !autograd::backward_frees_graph())
    know_by_fingerprint(e);
  e.ready = false;
  return std::move(e.value);
}

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

  frame->module_calls = nn::module_calls();
  Recorder recorder(*frame);
  std::vector<Tensor> outputs;
  {
    OutermostRegionGuard outermost;
    frame->first_serial_inside = region_first_serial;
    PolicyScopeGuard deciding(frame->options.policy);
    autograd::GraphRegionGuard region("checkpoint");  // for the pictures: Note [Graph regions]
    autograd::OpObserverGuard observe(&recorder);
    autograd::SavedTensorHooksGuard hooks(
        {[frame](const Tensor& t) -> std::any {
           Entry& e = frame->entries.emplace_back();
           e.shape = t.shape();
           e.dtype = t.dtype();
           e.device = t.device();
           e.op = autograd::saving_op_name();
           if (frame->checks_values()) e.saved = SameView::of(t);
           if (frame->current_op >= 0) {  // the value check is chosen when the op ends (Recorder::after)
             OpRecord& r = frame->ops[static_cast<size_t>(frame->current_op)];
             r.pending.push_back(t);
             if (frame->checks_values()) r.pending_entries.push_back(frame->entries.size() - 1);
           } else if (frame->checks_values()) {
             frame->choose_value_check(e, t);
           }
           ++checkpoint_stats().tensors_packed;
           return Handle{frame, frame->entries.size() - 1};
         },
         [](const std::any& packed) -> Tensor {
           const auto& h = std::any_cast<const Handle&>(packed);
           return h.frame->take(h.index);
         }});
    outputs = fn(inputs);
  }
  frame->kept_storages.clear();  // only the forward asks, and these storages may be freed and reused
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
  // forward(), not the call: the hooks and the call wrapper belong to whoever calls the module.
  // The module is still the one being called (Note [Module paths]), in the forward and in the
  // recompute, so that its own ops are at its path and its children's below it.
  return checkpoint(
      [&module](const Tensor& x) {
        const nn::ModuleCallGuard calling(module);
        return module.forward(x);
      },
      input, options);
}

}  // namespace ember::utils
