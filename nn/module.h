#pragma once
// Note [Modules]
// A Module owns named parameters and buffers and refers to named child modules. Children are
// usually plain members registered by reference (register_module("fc1", fc1)): the parent keeps
// pointers to its members. The containers (Sequential, ModuleList, ModuleDict) own their
// children instead (Note [Owning containers]).
//
// A Module is therefore neither copyable nor movable. A moved model would keep pointers into the
// object it was moved from; making moves work would mean storing member offsets instead of
// pointers, or re-registering every child in each move constructor, which every user model
// would have to write and keep right. Modules stay where they are built, and a factory hands
// one out on the heap:
//   std::unique_ptr<nn::Sequential> make_mlp(int64_t in, int64_t out);   // a factory
//   auto mlp = make_mlp(784, 10);                       // a model of its own
//   blocks.push_back(make_mlp(64, 64));                 // ModuleList / ModuleDict take ownership
//   std::unique_ptr<nn::Sequential> head = make_mlp(64, 10);   // a member of a model, which
//   register_module("head", *head);                            // registers what it points to
// The pointer moves; the module does not, so the registry stays valid.
//
// Parameters are Tensor handles shared between the module's registry and the member the layer
// exposes (Linear::weight). Anything that must replace a parameter's data — to(device),
// load_state_dict — writes into the existing TensorImpl, so every handle stays valid, and an
// optimizer built before model.to(device) still updates the right tensors.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd/hook_handle.h"
#include "core/ops.h"

namespace ember::nn {

using StateDict = std::map<std::string, Tensor>;
template <class Derived>
class MultiInputModule;

// What load_state_dict(strict = false) skipped, as PyTorch's missing_keys / unexpected_keys.
struct LoadResult {
  std::vector<std::string> missing_keys;     // in the model, not in the dict: left as they were
  std::vector<std::string> unexpected_keys;  // in the dict, not in the model: ignored
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  // The one-tensor forward most layers have; modules with other signatures derive from
  // nn::MultiInputModule (nn/multi_input_module.h) instead, and this one then calls theirs with
  // one tensor (the others defaulted) where forward's signature allows it.
  virtual Tensor forward(const Tensor& x);
  // Runs the forward pre-hooks, forward (through the call wrapper when one is set), then the
  // forward hooks (Note [Forward hooks]). utils::checkpoint_modules() sets the call wrapper to
  // route chosen blocks of an existing model through activation checkpointing, and
  // utils::uncheckpoint_modules() takes it away again, without touching the model's code.
  Tensor operator()(const Tensor& x);

  // Note [The call path]
  // Every call of a module, whatever its forward's signature, goes through call(): the tensor
  // arguments in order (an optional one left out is an undefined Tensor), and a function that
  // runs the forward on such a list and returns its tensor results in order. operator() above
  // builds both for a one-tensor forward; nn::MultiInputModule builds them for any signature,
  // keeping the plain values (a flag, a number) inside the function. So the hooks and the call
  // wrapper see one shape of call, the shape utils::checkpoint already takes: a checkpointed
  // module gets a gradient to each tensor input that requires one, and plain values are
  // replayed as they were. Being the one place every call passes, call() also keeps the stack
  // of calls under way that names the running module (Note [Module paths] in nn/module_path.h).
  using Tensors = std::vector<Tensor>;
  using ForwardFn = std::function<Tensors(const Tensors& inputs)>;
  using CallWrapper = std::function<Tensors(Module&, const ForwardFn& forward, const Tensors& inputs)>;
  void set_call_wrapper(CallWrapper wrapper) { call_wrapper_ = std::move(wrapper); }
  bool has_call_wrapper() const { return static_cast<bool>(call_wrapper_); }

  // Note [Forward hooks]
  // A pre-hook sees the module and its tensor inputs before forward and may return replacements
  // (an undefined Tensor, or std::nullopt, keeps them); a forward hook sees the module, the
  // inputs forward got and its outputs, and may return replacement outputs. The one-tensor kinds
  // are for modules called with one tensor giving one tensor (the error says so otherwise); the
  // list kinds see every tensor input and output of any module, and a replacement list must
  // keep the count. Each kind runs in registration order, each seeing the previous one's
  // result. They run in call(), around the call wrapper, so a module that
  // utils::checkpoint_modules() switched to checkpointing runs its hooks once per call: the
  // checkpoint recomputes the forward itself, not the call. The hooks of modules *inside* a
  // checkpointed block are part of that block's forward, so they run again when backward
  // recomputes it, and must compute the same replacement then, or the recompute would not
  // reproduce the forward; a hook with side effects (recording activations, counting calls)
  // can skip them while autograd::is_recomputing(). A handle holds the hooks weakly
  // (core/autograd/hook_handle.h): remove() after the module is gone does nothing.
  using ForwardPreHook = std::function<Tensor(Module&, const Tensor& input)>;
  using ForwardHook = std::function<Tensor(Module&, const Tensor& input, const Tensor& output)>;
  using ForwardPreHookOnAll = std::function<std::optional<Tensors>(Module&, const Tensors& inputs)>;
  using ForwardHookOnAll =
      std::function<std::optional<Tensors>(Module&, const Tensors& inputs, const Tensors& outputs)>;
  autograd::HookHandle register_forward_pre_hook(ForwardPreHook hook);
  autograd::HookHandle register_forward_hook(ForwardHook hook);
  autograd::HookHandle register_forward_pre_hook(ForwardPreHookOnAll hook);
  autograd::HookHandle register_forward_hook(ForwardHookOnAll hook);

  // The type's name for messages and printing: the dynamic type's name without its namespaces
  // or enclosing scopes ("Linear" for ember::nn::Linear, "MyNet" for a user's MyNet). Override
  // it only to print something else.
  virtual std::string name() const;

  Tensor& register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor value);
  template <class M>
  M& register_module(const std::string& name, M& child) {
    add_child(name, &child);
    return child;
  }

  // Each module and tensor once, under its first name, when it is held at several places
  // (Note [Shared modules and parameters]); state_dict() keeps every name.
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Module*> children() const;
  std::vector<std::pair<std::string, Module*>> named_children() const { return children_; }
  // This module and every descendant, depth first, with dotted names ("" for this one).
  std::vector<std::pair<std::string, Module*>> named_modules();

  // Calls fn on every descendant, children before their parent, then on this module, as
  // PyTorch's apply: model.apply([](nn::Module& m) { ... re-initialise every Linear ... }).
  Module& apply(const std::function<void(Module&)>& fn);

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves (or converts) parameters, their gradients and buffers in place.
  void to(Device device);
  void to(DType dtype);  // floating parameters and buffers only, as PyTorch
  void zero_grad(bool set_to_none = true);
  // Sets requires_grad on every parameter of this module and its descendants, as PyTorch's
  // module.requires_grad_: model.encoder.requires_grad_(false) freezes the encoder for fine-tuning
  // (its parameters get no gradient, and an optimizer skips a parameter without one).
  Module& requires_grad_(bool requires_grad = true);

  StateDict state_dict() const;
  // Copies values into the existing tensors (converting dtype, as a copy does). strict: the keys
  // must match exactly; the error lists every missing key, unexpected key and shape mismatch.
  // Undefined tensors and shape mismatches are refused either way. Returns the keys that did not
  // match, which a non-strict load would otherwise pass over silently.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

  // A multi-line summary like PyTorch's print(model).
  std::string str() const;

 protected:
  // Note [The call path]: hooks, the call wrapper or forward, hooks.
  Tensors call(Tensors inputs, const ForwardFn& forward);
  void add_child(const std::string& name, Module* child);
  // Lines inside "Name(...)" for str(); layers override it to show their configuration.
  virtual std::string extra_repr() const { return ""; }

 private:
  template <class Derived>
  friend class MultiInputModule;
  // What forward(x) runs when a layer does not override it: an error, unless the layer is a
  // MultiInputModule whose forward can take one tensor.
  virtual Tensor forward_from_one_tensor(const Tensor& x);
  void check_new_name(const std::string& name) const;
  // Depth first from this module; Note [Shared modules and parameters].
  void walk_modules(const std::string& prefix, bool remove_duplicate, std::set<const Module*>& seen,
                    const std::function<void(const std::string&, const Module&)>& visit) const;
  std::vector<std::pair<std::string, Tensor>> named_tensors(bool params, bool recurse, bool remove_duplicate) const;
  template <class Visit>
  void visit_tensors(bool params, bool buffers, Visit visit);

  bool training_ = true;
  CallWrapper call_wrapper_;
  // Created by the first registration; shared so that handles can hold them weakly.
  std::shared_ptr<autograd::HookList<ForwardPreHookOnAll>> pre_hooks_;
  std::shared_ptr<autograd::HookList<ForwardHookOnAll>> hooks_;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace ember::nn
