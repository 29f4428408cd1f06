#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>

#include "core/autograd/grad_mode.h"
#include "core/memory_category.h"
#include "nn/module_path.h"

namespace ember::nn {

Tensor Module::forward(const Tensor& x) { return forward_from_one_tensor(x); }

Tensor Module::forward_from_one_tensor(const Tensor&) {
  EMBER_FAIL("[", name(), "] this module has no one-tensor forward()");
}

std::string Module::name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  const std::string full = status == 0 ? demangled.get() : mangled;
  // The scopes end at the last "::" before any template arguments: ember::nn::Linear,
  // (anonymous namespace)::Net, Suite_Test::TestBody()::Local.
  const size_t scope = full.substr(0, full.find('<')).rfind("::");
  return scope == std::string::npos ? full : full.substr(scope + 2);
}

Tensor Module::operator()(const Tensor& x) {
  return call({x}, [this](const Tensors& in) { return Tensors{forward(in[0])}; })[0];
}

Module::Tensors Module::call(Tensors inputs, const ForwardFn& forward) {
  const ModuleCallGuard calling(*this);  // Note [Module paths]
  if (pre_hooks_) {
    // Copies: a hook may remove itself or register another while the list runs.
    const auto pre_hooks = pre_hooks_->hooks;
    for (const auto& [id, hook] : pre_hooks) {
      std::optional<Tensors> replaced = hook(*this, inputs);
      if (!replaced) continue;
      EMBER_CHECK(replaced->size() == inputs.size(), "[", name(), "] a forward pre-hook returned ",
                  replaced->size(), " inputs for a call with ", inputs.size());
      inputs = std::move(*replaced);
    }
  }
  Tensors outputs = call_wrapper_ ? call_wrapper_(*this, forward, inputs) : forward(inputs);
  if (hooks_) {
    const auto hooks = hooks_->hooks;
    for (const auto& [id, hook] : hooks) {
      std::optional<Tensors> replaced = hook(*this, inputs, outputs);
      if (!replaced) continue;
      EMBER_CHECK(replaced->size() == outputs.size(), "[", name(), "] a forward hook returned ", replaced->size(),
                  " outputs for a forward with ", outputs.size());
      outputs = std::move(*replaced);
    }
  }
  return outputs;
}

namespace {
template <class Hook>
autograd::HookHandle add_hook(std::shared_ptr<autograd::HookList<Hook>>& list, Hook hook, const std::string& module,
                              const char* api) {
  EMBER_CHECK(hook, "[", module, "] ", api, ": the hook is empty");
  if (!list) list = std::make_shared<autograd::HookList<Hook>>();
  const uint64_t id = list->add(std::move(hook));
  return {list, id};
}

// A one-tensor hook on a call with other counts would see only part of it.
void check_one_tensor(const Module& m, const char* api, bool one_tensor, const std::string& call) {
  EMBER_CHECK(one_tensor, "[", m.name(), "] ", api, ": a one-tensor hook on a call with ", call,
              "; register a hook that takes std::vector<Tensor> to see them all");
}
}  // namespace

autograd::HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  EMBER_CHECK(hook, "[", name(), "] register_forward_pre_hook: the hook is empty");
  return register_forward_pre_hook([hook = std::move(hook)](Module& m, const Tensors& in) -> std::optional<Tensors> {
    check_one_tensor(m, "register_forward_pre_hook", in.size() == 1,
                     std::to_string(in.size()) + " tensor inputs");
    Tensor replaced = hook(m, in[0]);
    if (!replaced.defined()) return std::nullopt;
    return Tensors{std::move(replaced)};
  });
}

autograd::HookHandle Module::register_forward_hook(ForwardHook hook) {
  EMBER_CHECK(hook, "[", name(), "] register_forward_hook: the hook is empty");
  return register_forward_hook(
      [hook = std::move(hook)](Module& m, const Tensors& in, const Tensors& out) -> std::optional<Tensors> {
        check_one_tensor(m, "register_forward_hook", in.size() == 1 && out.size() == 1,
                         std::to_string(in.size()) + " tensor input(s) and " + std::to_string(out.size()) +
                             " output(s)");
        Tensor replaced = hook(m, in[0], out[0]);
        if (!replaced.defined()) return std::nullopt;
        return Tensors{std::move(replaced)};
      });
}

autograd::HookHandle Module::register_forward_pre_hook(ForwardPreHookOnAll hook) {
  return add_hook(pre_hooks_, std::move(hook), name(), "register_forward_pre_hook");
}

autograd::HookHandle Module::register_forward_hook(ForwardHookOnAll hook) {
  return add_hook(hooks_, std::move(hook), name(), "register_forward_hook");
}

void Module::check_new_name(const std::string& name) const {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos, "[", this->name(),
              "] invalid name '", name, "' (non-empty, without '.')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  EMBER_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), "[", this->name(), "] the name '", name,
              "' is already registered");
}

Tensor& Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name);
  EMBER_CHECK(value.defined(), "[", this->name(), "] parameter '", name, "' is undefined");
  if (requires_grad) value.requires_grad_();
  memory::tag(value, MemoryCategory::Parameters);  // Note [Memory by category]
  parameters_.emplace_back(name, std::move(value));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  memory::tag(value, MemoryCategory::Parameters);  // the model's state: Note [Memory by category]
  buffers_.emplace_back(name, std::move(value));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, Module* child) {
  check_new_name(name);
  EMBER_CHECK(child != this, "[", this->name(), "] a module cannot be its own child");
  // Note [Modules form a tree without cycles]
  // A child that already holds this module (at any depth) would make every walk over the tree
  // (named_modules, train, to, str) recurse forever, so the cycle is refused here, where it
  // would be made, and the walks stay plain. A module may still appear twice (shared, as
  // PyTorch allows); the walks de-duplicate it.
  std::vector<const Module*> pending{child};
  std::set<const Module*> seen;
  while (!pending.empty()) {
    const Module* m = pending.back();
    pending.pop_back();
    if (!seen.insert(m).second) continue;
    for (const auto& [sub_name, sub] : m->children_) {
      EMBER_CHECK(sub != this, "[", this->name(), "] registering ", child->name(), " as '", name,
                  "' would make a cycle: it already contains this module");
      pending.push_back(sub);
    }
  }
  children_.emplace_back(name, child);
}

// Note [Shared modules and parameters]
// A module (or a tensor) held at two places in the tree is listed once, under the first name a
// depth-first walk meets, as PyTorch's named_modules() and named_parameters() do: an optimizer
// must not step a shared weight twice, nor clip_grad_norm_ count it twice. state_dict() keeps
// every name (a tied weight is saved under both), and so walks with remove_duplicate off.
void Module::walk_modules(const std::string& prefix, bool remove_duplicate, std::set<const Module*>& seen,
                          const std::function<void(const std::string&, const Module&)>& visit) const {
  if (remove_duplicate && !seen.insert(this).second) return;
  visit(prefix, *this);
  for (const auto& [name, child] : children_)
    child->walk_modules(prefix.empty() ? name : prefix + "." + name, remove_duplicate, seen, visit);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::set<const Module*> seen;
  walk_modules("", true, seen, [&](const std::string& name, const Module& m) {
    out.emplace_back(name, const_cast<Module*>(&m));  // this walk starts at a non-const *this
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_tensors(bool params, bool recurse,
                                                                  bool remove_duplicate) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<const Module*> seen_modules;
  std::set<const TensorImpl*> seen_tensors;
  auto visit = [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : params ? m.parameters_ : m.buffers_) {
      if (!t.defined()) continue;  // a buffer registered as undefined (BatchNorm without stats)
      if (remove_duplicate && !seen_tensors.insert(t.impl()).second) continue;
      out.emplace_back(prefix.empty() ? name : prefix + "." + name, t);
    }
  };
  if (recurse) walk_modules("", remove_duplicate, seen_modules, visit);
  else visit("", *this);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  return named_tensors(true, recurse, true);
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  return named_tensors(false, recurse, true);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<Module*> Module::children() const {
  std::vector<Module*> out;
  for (auto& [name, child] : children_) out.push_back(child);
  return out;
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [name, child] : children_) child->apply(fn);
  fn(*this);
  return *this;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

namespace {
// Points `dst`'s impl at `src`'s data, keeping every handle to dst valid (Note [Modules]).
void replace_data(const Tensor& dst, const Tensor& src) {
  TensorImpl* d = dst.impl();
  d->storage = src.storage();
  d->shape = src.shape();
  d->strides = src.strides();
  d->offset = src.offset();
  d->dtype = src.dtype();
}

// A parameter or buffer that to() gave new memory, and its gradient: Note [Memory by category].
void tag_moved(const Tensor& t) {
  memory::tag(t, MemoryCategory::Parameters);
  memory::tag(t.grad(), MemoryCategory::Gradients);
}
}  // namespace

template <class Visit>
void Module::visit_tensors(bool params, bool buffers, Visit visit) {
  std::set<const TensorImpl*> seen;  // a shared tensor is converted once
  for (auto& [name, m] : named_modules()) {
    auto each = [&](std::vector<std::pair<std::string, Tensor>>& list) {
      for (auto& [n, t] : list)
        if (t.defined() && seen.insert(t.impl()).second) visit(t);
    };
    if (params) each(m->parameters_);
    if (buffers) each(m->buffers_);
  }
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  visit_tensors(true, true, [&](Tensor& t) {
    replace_data(t, t.to(device));
    if (t.grad().defined()) replace_data(t.grad(), t.grad().to(device));
    tag_moved(t);
  });
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  EMBER_CHECK(is_floating(dtype), "[", name(), "] to() expects a floating point dtype, got ", dtype);
  visit_tensors(true, true, [&](Tensor& t) {
    if (!is_floating(t.dtype())) return;
    replace_data(t, t.to(dtype));
    if (t.grad().defined()) replace_data(t.grad(), t.grad().to(dtype));
    tag_moved(t);
  });
}

Module& Module::requires_grad_(bool requires_grad) {
  for (const Tensor& p : parameters()) p.requires_grad_(requires_grad);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  visit_tensors(true, false, [&](Tensor& t) {
    if (!t.grad().defined()) return;
    if (set_to_none) t.set_grad(Tensor());
    else t.grad().zero_();
  });
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_tensors(true, true, false)) out[name] = t;
  for (auto& [name, t] : named_tensors(false, true, false)) out[name] = t;
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  LoadResult result;
  std::vector<std::string> undefined, mismatched;
  for (auto& [key, t] : own) {
    auto it = state.find(key);
    if (it == state.end()) {
      result.missing_keys.push_back(key);
    } else if (!it->second.defined()) {
      undefined.push_back(key);
    } else if (it->second.shape() != t.shape()) {
      mismatched.push_back(key + ": checkpoint " + shape_str(it->second.shape()) + " vs model " + shape_str(t.shape()));
    }
  }
  for (auto& [key, t] : state)
    if (!own.count(key)) result.unexpected_keys.push_back(key);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::string problems;
  if (strict && !result.missing_keys.empty()) problems += "\n  missing keys: " + join(result.missing_keys);
  if (strict && !result.unexpected_keys.empty()) problems += "\n  unexpected keys: " + join(result.unexpected_keys);
  if (!undefined.empty()) problems += "\n  undefined tensors: " + join(undefined);
  if (!mismatched.empty()) problems += "\n  shape mismatches: " + join(mismatched);
  EMBER_CHECK(problems.empty(), "[", name(), "] load_state_dict failed:", problems);
  NoGradGuard no_grad;
  for (auto& [key, t] : own) {
    auto it = state.find(key);
    if (it != state.end()) t.copy_(it->second);
  }
  return result;
}

std::string Module::str() const {
  std::ostringstream os;
  os << name() << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    for (auto& [child_name, child] : children_) {
      std::string inner = child->str(), indented;
      for (char ch : inner) indented += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
      os << "  (" << child_name << "): " << indented << "\n";
    }
  }
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.str(); }

}  // namespace ember::nn
