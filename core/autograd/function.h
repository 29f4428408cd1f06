#pragma once
// Note [Writing an op]
// An op is a struct with a static forward and a static backward side by side:
//
//   struct Exp : Function<Exp> {
//     static constexpr const char* name = "exp";
//     struct State { SavedRef y; };
//     static Tensor forward(Ctx& c, State& s, const Tensor& x) { Tensor y = unary_kernel(...); s.y = c.save(y); return y; }
//     static Grads backward(Ctx& c, const State& s, const Tensor& g) { return {g * c.get(s.y)}; }
//   };
//
// Exp::apply(x) runs forward without recording (grad mode off inside, so forward may use other
// ops freely) and, when grad mode is on and some tensor argument requires grad, wraps the
// context in a FunctionNode connected to the inputs' gradient edges. backward returns one
// gradient per tensor argument, in argument order (std::vector<Tensor> arguments count element
// by element); an undefined Tensor means "no gradient", and so do gradients missing at the end.
// A gradient may be returned in a shape the input broadcasts to: Note [Gradient shapes].
//
// Note [Op state]
// Tensors a backward needs go through Ctx::save (Note [Named saved tensors]). Everything else it
// needs (a dim, a dtype, the input's shape, a convolution's window) the op declares as a nested
// struct State with named members; forward fills it and backward reads it:
//
//   struct Cast : Function<Cast> {
//     static constexpr const char* name = "to_dtype";
//     struct State { DType input_dtype; };
//     static Tensor forward(Ctx& c, State& s, const Tensor& x, DType dtype) { s.input_dtype = x.dtype(); ... }
//     static Grads backward(Ctx& c, const State& s, const Tensor& g) { return {g.to(s.input_dtype)}; }
//   };
//
// The FunctionNode holds the State next to its Ctx, so a backward reads the same object its
// forward wrote, and the State's type says what the backward depends on. When nothing records,
// forward fills a local State that is then dropped. An op that needs nothing keeps two-argument
// signatures, forward(Ctx&, args...) and backward(Ctx&, g): HasState tells the kinds apart at
// compile time.
//
// Note [Named saved tensors]
// Ctx::save returns a SavedRef, the saved tensor's place in its node, and the op's State keeps it
// under a name: backward reads c.get(s.rstd), not "the fourth thing saved", so a reader sees what
// each formula uses and adding a save cannot shift the others. A tensor saved only when an
// optional argument was given is a std::optional<SavedRef>: c.get of an empty one is an undefined
// tensor, so what is optional is in the State's type, not in a position that depends on which
// other arguments came. The version check and the saved-tensor hooks apply to every save as
// before (Note [Saved tensors and versions]). Ctx::saved(i), the positional read, stays for the
// custom ops written before SavedRef, deprecated in 0.2.0 and gone in 0.3.0 (CHANGELOG.md);
// ember's own ops do not use it (scripts/check-docs keeps it so).
//
// Note [Multi-output functions]
// An op whose forward returns std::vector<Tensor> has one output per element:
//
//   struct SplitHalves : Function<SplitHalves> {
//     static std::vector<Tensor> forward(Ctx& c, const Tensor& x) { return {first half, second half}; }
//     static Grads backward(Ctx& c, const Grads& g) { /* g[0], g[1]: one per output */ }
//   };
//
// Output i is a non-leaf with grad_fn = the node and output_nr = i; the engine already keys
// gradients by (node, output_nr), so nothing else changes. backward receives one gradient per
// output, an undefined Tensor for an output no gradient reached (when only some outputs are
// used): not zeros, so a backward that can skip a term does not pay for a tensor of zeros — it
// tests g[i].defined(), and materializes zeros itself where a formula needs them. The forward's
// return type and the backward's parameter go together (a static_assert says so), and the
// outputs must be distinct tensors; one that is an argument becomes an alias of it (Note [An
// output that is an argument]). ember's split (and chunk) is such
// an op: one node for all its pieces (Note [Split as one node] in core/ops/index.cpp).
//
// Note [Gradient shapes]
// FunctionNode fits what a backward returns to the inputs before the engine sees it: a gradient
// whose shape differs from its input's, but to which the input's shape broadcasts, is reduced
// with sum_to (so a backward may return g itself for an input that was broadcast); any other
// shape throws an ember::Error naming the op, the input index and both shapes. A gradient of
// another floating dtype is converted to the input's (a float32 leaf's .grad stays float32, as
// PyTorch's engine does); an integer gradient, or one on another device, throws. Inputs that
// need no gradient are dropped unchecked. This catches a wrong formula at the node that produced it,
// not three nodes later.
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/autograd/op_label.h"
#include "core/autograd/op_observer.h"
#include "core/autograd/saved_tensor.h"
#include "core/check.h"

namespace ember::autograd {

using Grads = std::vector<Tensor>;

// Where a tensor went in its node's saved list: what Ctx::save returns (Note [Named saved tensors]).
class SavedRef {
 public:
  SavedRef() = default;  // refers to nothing: reading it is an error

 private:
  friend class Ctx;
  explicit SavedRef(size_t index) : index_(index) {}
  size_t index_ = static_cast<size_t>(-1);
};

class Ctx {
 public:
  Ctx(bool recording, const char* op_name) : recording_(recording), op_name_(op_name) {}

  // Every tensor a backward needs goes through save() — outputs, inputs, masks, indices — so all
  // of them get the version check and the saved-tensor hooks. Saving is free when nothing will
  // run backward.
  SavedRef save(const Tensor& t) {
    if (!recording_) return SavedRef();
    saved_.emplace_back(t, op_name_);
    return SavedRef(saved_.size() - 1);
  }
  // Note [Named saved tensors]
  Tensor get(SavedRef ref) const {
    EMBER_CHECK(ref.index_ < saved_.size(), "[", op_name_, "] backward read a tensor its forward did not save");
    return saved_[ref.index_].unpack();
  }
  Tensor get(const std::optional<SavedRef>& ref) const { return ref ? get(*ref) : Tensor(); }
  // The i-th save, by position: kept for custom ops written before SavedRef, until 0.3.0.
  [[deprecated("Ctx::saved(i) goes in ember 0.3.0: keep the SavedRef that save() returns and read it with get()")]]
  Tensor saved(size_t i) const { return saved_.at(i).unpack(); }
  const std::vector<SavedTensor>& saved_tensors() const { return saved_; }
  bool needs_input_grad(size_t i) const { return i < needs_grad_.size() && needs_grad_[i]; }
  void release() {
    for (auto& s : saved_) s.release();
  }

 private:
  template <class Op>
  friend struct Function;
  template <class Op>
  friend struct FunctionNode;
  bool recording_;
  const char* op_name_;
  std::vector<SavedTensor> saved_;
  std::vector<bool> needs_grad_;
};

// See Note [Op state].
template <class Op>
concept HasState = requires { typename Op::State; };

// StateOf<Op> is what a FunctionNode holds for Op: its State, or nothing (NoState).
struct NoState {};

template <class Op>
struct StateOfImpl {
  using type = NoState;
};
template <HasState Op>
struct StateOfImpl<Op> {
  using type = typename Op::State;
};
template <class Op>
using StateOf = typename StateOfImpl<Op>::type;

// See Note [Multi-output functions]: the backward takes all the outputs' gradients.
template <class Op>
concept TakesGradPerOutput =
    (HasState<Op> && requires(Ctx& c, const StateOf<Op>& s, const Grads& g) { Op::backward(c, s, g); }) ||
    (!HasState<Op> && requires(Ctx& c, const Grads& g) { Op::backward(c, g); });

namespace detail {

template <class Op, class... Args>
auto call_forward(Ctx& c, StateOf<Op>& state, const Args&... args) {
  if constexpr (HasState<Op>) {
    return Op::forward(c, state, args...);
  } else {
    return Op::forward(c, args...);
  }
}

template <class Op, class GradOutputs>
Grads call_backward(Ctx& c, const StateOf<Op>& state, const GradOutputs& grads) {
  if constexpr (HasState<Op>) {
    return Op::backward(c, state, grads);
  } else {
    return Op::backward(c, grads);
  }
}

// Note [Gradient shapes]: reduces or rejects each gradient; drops those no input needs.
struct InputMeta {
  Shape shape;
  DType dtype = kFloat32;
  Device device = kCPU;
};
Grads fit_gradients(const char* op, Grads grads, const std::vector<InputMeta>& inputs,
                    const std::vector<bool>& needs_grad);

}  // namespace detail

template <class Op>
struct FunctionNode final : Node {
  FunctionNode() : ctx(true, Op::name) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Grads input_grads;
    if constexpr (TakesGradPerOutput<Op>) {
      input_grads = detail::call_backward<Op>(ctx, state, grads);
    } else {
      input_grads = detail::call_backward<Op>(ctx, state, grads[0]);
    }
    return detail::fit_gradients(Op::name, std::move(input_grads), inputs, ctx.needs_grad_);
  }
  const char* name() const override { return Op::name; }
  int num_outputs() const override { return outputs; }
  const std::vector<SavedTensor>* saved_tensors() const override { return &ctx.saved_tensors(); }
  void release_saved() override { ctx.release(); }
  Ctx ctx;
  StateOf<Op> state{};
  std::vector<detail::InputMeta> inputs;  // Note [Gradient shapes]
  int outputs = 1;                      // Note [Multi-output functions]
};

namespace detail {

inline void collect_tensors(std::vector<Tensor>&) {}
template <class A, class... Rest>
void collect_tensors(std::vector<Tensor>& out, const A& a, const Rest&... rest) {
  if constexpr (std::is_same_v<A, Tensor>) {
    out.push_back(a);
  } else if constexpr (std::is_same_v<A, std::vector<Tensor>>) {
    out.insert(out.end(), a.begin(), a.end());
  }
  collect_tensors(out, rest...);
}

inline bool any_requires_grad() { return false; }
template <class A, class... Rest>
bool any_requires_grad(const A& a, const Rest&... rest) {
  if constexpr (std::is_same_v<A, Tensor>) {
    if (a.defined() && a.requires_grad()) return true;
  } else if constexpr (std::is_same_v<A, std::vector<Tensor>>) {
    for (const Tensor& t : a)
      if (t.defined() && t.requires_grad()) return true;
  }
  return any_requires_grad(rest...);
}

inline bool is_argument(const Tensor&) { return false; }
template <class A, class... Rest>
bool is_argument(const Tensor& out, const A& a, const Rest&... rest) {
  if constexpr (std::is_same_v<A, Tensor>) {
    if (out.is_same(a)) return true;
  } else if constexpr (std::is_same_v<A, std::vector<Tensor>>) {
    for (const Tensor& t : a)
      if (out.is_same(t)) return true;
  }
  return is_argument(out, rest...);
}

// Note [An output that is an argument]
// A forward may return one of its arguments unchanged (an identity, a no-op cast). Giving that
// tensor the node's history would turn the caller's leaf into a non-leaf (an optimizer would
// then refuse it) and cut the argument's own edge, so the output is a new handle over the same
// data instead — an alias, as PyTorch returns — and only the alias gets the history.
Tensor alias(const Tensor& t);

template <class Op>
void connect(FunctionNode<Op>&, std::vector<bool>&) {}
template <class Op, class A, class... Rest>
void connect(FunctionNode<Op>& node, std::vector<bool>& needs, const A& a, const Rest&... rest) {
  auto add = [&](const Tensor& t) {
    node.next.push_back(t.defined() ? gradient_edge(t) : Edge{});
    if (t.defined()) node.inputs.push_back({t.shape(), t.dtype(), t.device()});
    else node.inputs.emplace_back();
    needs.push_back(node.next.back().valid());
  };
  if constexpr (std::is_same_v<A, Tensor>) {
    add(a);
  } else if constexpr (std::is_same_v<A, std::vector<Tensor>>) {
    for (const Tensor& t : a) add(t);
  }
  connect(node, needs, rest...);
}

// Makes `out` the non-leaf output `output_nr` of `node`.
void set_history(Tensor& out, std::shared_ptr<Node> node, int output_nr = 0);

// Makes each of `outputs`, which must be distinct, an output of `node` (Note [Multi-output
// functions]).
void set_history(std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node);

}  // namespace detail

template <class Op>
struct Function {
  template <class... Args>
  static auto apply(const Args&... args) {
    using Output = decltype(detail::call_forward<Op>(std::declval<Ctx&>(), std::declval<StateOf<Op>&>(), args...));
    constexpr bool kMultiOutput = std::is_same_v<Output, std::vector<Tensor>>;
    static_assert(kMultiOutput || std::is_same_v<Output, Tensor>, "forward returns Tensor or std::vector<Tensor>");
    static_assert(kMultiOutput == TakesGradPerOutput<Op>,
                  "a forward returning std::vector<Tensor> goes with a backward taking const Grads& "
                  "(Note [Multi-output functions])");
    if constexpr (kMultiOutput) {
      return run(args...);  // not observed: Note [Op observers]
    } else {
      OpObserver* observer = detail::op_observer;  // Note [Op observers]
      if (!observer || !is_grad_enabled() || !detail::any_requires_grad(args...)) return run(args...);
      std::vector<Tensor> tensors;
      detail::collect_tensors(tensors, args...);
      return detail::run_observed(*observer, Op::name, tensors, [&] { return run(args...); });
    }
  }

 private:
  template <class... Args>
  static auto run(const Args&... args) {
    OpLabelGuard label(Op::name, current_op_label().backward);  // ops run by a backward are backward
    if (!is_grad_enabled() || !detail::any_requires_grad(args...)) {
      Ctx ctx(false, Op::name);
      StateOf<Op> state{};
      NoGradGuard no_grad;
      return detail::call_forward<Op>(ctx, state, args...);
    }
    auto node = std::make_shared<FunctionNode<Op>>();
    detail::connect(*node, node->ctx.needs_grad_, args...);
    auto out = [&] {
      NoGradGuard no_grad;
      return detail::call_forward<Op>(node->ctx, node->state, args...);
    }();
    if constexpr (std::is_same_v<decltype(out), Tensor>) {
      EMBER_CHECK(out.defined(), "[", Op::name, "] forward returned an undefined tensor");
      if (detail::is_argument(out, args...)) out = detail::alias(out);  // Note [An output that is an argument]
      detail::set_history(out, node);
    } else {
      for (Tensor& o : out)
        if (o.defined() && detail::is_argument(o, args...)) o = detail::alias(o);
      detail::set_history(out, node);
      node->outputs = static_cast<int>(out.size());
    }
    return out;
  }
};

}  // namespace ember::autograd
