#pragma once
// Note [Writing an op]
// An op is a struct with a static forward and a static backward side by side:
//
//   struct Exp : Function<Exp> {
//     static constexpr const char* name = "exp";
//     static Tensor forward(Ctx& c, const Tensor& x) { Tensor y = unary_kernel(...); c.save(y); return y; }
//     static Grads backward(Ctx& c, const Tensor& g) { return {g * c.saved(0)}; }
//   };
//
// Exp::apply(x) runs forward without recording (grad mode off inside, so forward may use other
// ops freely) and, when grad mode is on and some tensor argument requires grad, wraps the
// context in a FunctionNode connected to the inputs' gradient edges. backward returns one
// gradient per tensor argument, in argument order (std::vector<Tensor> arguments count element
// by element); an undefined Tensor means "no gradient". Gradients may be returned in a
// broadcast shape: the op reduces them with sum_to before returning.
//
// Note [Op state]
// Tensors a backward needs go through Ctx::save. Everything else it needs (a dim, a dtype, the
// input's shape, a convolution's window) the op declares as a nested struct State with named
// members; forward fills it and backward reads it:
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
// forward fills a local State that is then dropped. An op without a State keeps the two-argument
// signatures above: HasState tells the two kinds apart at compile time.
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/autograd/op_label.h"
#include "core/autograd/saved_tensor.h"

namespace ember::autograd {

using Grads = std::vector<Tensor>;

class Ctx {
 public:
  Ctx(bool recording, const char* op_name) : recording_(recording), op_name_(op_name) {}

  // Every tensor a backward needs goes through save() — outputs, inputs, masks, indices — so all
  // of them get the version check and the saved-tensor hooks. Saving is free when nothing will
  // run backward.
  void save(const Tensor& t) {
    if (recording_) saved_.emplace_back(t, op_name_);
  }
  Tensor saved(size_t i) const { return saved_.at(i).unpack(); }
  const std::vector<SavedTensor>& saved_tensors() const { return saved_; }
  bool needs_input_grad(size_t i) const { return i < needs_grad_.size() && needs_grad_[i]; }
  void release() {
    for (auto& s : saved_) s.release();
  }

 private:
  template <class Op>
  friend struct Function;
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

namespace detail {

template <class Op, class... Args>
Tensor call_forward(Ctx& c, StateOf<Op>& state, const Args&... args) {
  if constexpr (HasState<Op>) {
    return Op::forward(c, state, args...);
  } else {
    return Op::forward(c, args...);
  }
}

template <class Op>
Grads call_backward(Ctx& c, const StateOf<Op>& state, const Tensor& grad) {
  if constexpr (HasState<Op>) {
    return Op::backward(c, state, grad);
  } else {
    return Op::backward(c, grad);
  }
}

}  // namespace detail

template <class Op>
struct FunctionNode final : Node {
  FunctionNode() : ctx(true, Op::name) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return detail::call_backward<Op>(ctx, state, grads[0]);
  }
  const char* name() const override { return Op::name; }
  const std::vector<SavedTensor>* saved_tensors() const override { return &ctx.saved_tensors(); }
  void release_saved() override { ctx.release(); }
  const std::vector<Shape>* input_shapes() const override { return &shapes_of_inputs; }
  Ctx ctx;
  StateOf<Op> state{};
  std::vector<Shape> shapes_of_inputs;  // for the engine's gradient shape check
};

// Note [Op observers]
// A thread-local observer sees every op applied on this thread that records into the autograd
// graph: before it runs (with its tensor arguments) and after (with its output). Returning a tensor from before() skips the op and uses
// that tensor as its output. Selective activation checkpointing uses this to keep the outputs of
// expensive ops in the forward and to replay them instead of recomputing them. Only top-level
// recording ops are observed: ops that an op runs inside its own forward are not, so skipping an
// op never changes which ops the observer sees next, and neither are side computations under
// NoGradGuard (BatchNorm's running statistics), which a recompute legitimately skips.
struct OpObserver {
  virtual ~OpObserver() = default;
  virtual std::optional<Tensor> before(const char* op, const std::vector<Tensor>& args) = 0;
  virtual void after(const char* op, const Tensor& output) = 0;
};

namespace detail {
inline thread_local OpObserver* op_observer = nullptr;
}

// Installs an observer (or none) for the guard's lifetime.
class OpObserverGuard {
 public:
  explicit OpObserverGuard(OpObserver* observer) : previous_(detail::op_observer) { detail::op_observer = observer; }
  ~OpObserverGuard() { detail::op_observer = previous_; }
  OpObserverGuard(const OpObserverGuard&) = delete;
  OpObserverGuard& operator=(const OpObserverGuard&) = delete;

 private:
  OpObserver* previous_;
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

template <class Op>
void connect(FunctionNode<Op>&, std::vector<bool>&) {}
template <class Op, class A, class... Rest>
void connect(FunctionNode<Op>& node, std::vector<bool>& needs, const A& a, const Rest&... rest) {
  auto add = [&](const Tensor& t) {
    node.next.push_back(t.defined() ? gradient_edge(t) : Edge{});
    node.shapes_of_inputs.push_back(t.defined() ? t.shape() : Shape{});
    needs.push_back(node.next.back().valid());
  };
  if constexpr (std::is_same_v<A, Tensor>) {
    add(a);
  } else if constexpr (std::is_same_v<A, std::vector<Tensor>>) {
    for (const Tensor& t : a) add(t);
  }
  connect(node, needs, rest...);
}

// Makes `out` a non-leaf output of `node`.
void set_history(Tensor& out, std::shared_ptr<Node> node);

}  // namespace detail

template <class Op>
struct Function {
  template <class... Args>
  static Tensor apply(const Args&... args) {
    OpObserver* observer = detail::op_observer;
    if (!observer || !is_grad_enabled() || !detail::any_requires_grad(args...)) return run(args...);
    std::vector<Tensor> tensors;
    detail::collect_tensors(tensors, args...);
    if (std::optional<Tensor> replayed = observer->before(Op::name, tensors)) return *replayed;
    Tensor out;
    {
      OpObserverGuard top_level_only(nullptr);  // ops an op runs inside itself are its business
      out = run(args...);
    }
    observer->after(Op::name, out);
    return out;
  }

 private:
  template <class... Args>
  static Tensor run(const Args&... args) {
    OpLabelGuard label(Op::name, current_op_label().backward);  // ops run by a backward are backward
    if (!is_grad_enabled() || !detail::any_requires_grad(args...)) {
      Ctx ctx(false, Op::name);
      StateOf<Op> state{};
      NoGradGuard no_grad;
      return detail::call_forward<Op>(ctx, state, args...);
    }
    auto node = std::make_shared<FunctionNode<Op>>();
    detail::connect(*node, node->ctx.needs_grad_, args...);
    Tensor out;
    {
      NoGradGuard no_grad;
      out = detail::call_forward<Op>(node->ctx, node->state, args...);
    }
    detail::set_history(out, node);
    return out;
  }
};

}  // namespace ember::autograd
