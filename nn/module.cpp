#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>
#include <typeinfo>

#include "core/autograd/grad_mode.h"

namespace ember::nn {

Tensor Module::forward(const Tensor&) {
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
  Tensor input = x;
  if (pre_hooks_) {
    // Copies: a hook may remove itself or register another while the list runs.
    const auto pre_hooks = pre_hooks_->hooks;
    for (const auto& [id, hook] : pre_hooks)
      if (Tensor replaced = hook(*this, input); replaced.defined()) input = std::move(replaced);
  }
  Tensor output = call_wrapper_ ? call_wrapper_(*this, input) : forward(input);
  if (hooks_) {
    const auto hooks = hooks_->hooks;
    for (const auto& [id, hook] : hooks)
      if (Tensor replaced = hook(*this, input, output); replaced.defined()) output = std::move(replaced);
  }
  return output;
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
}  // namespace

autograd::HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  return add_hook(pre_hooks_, std::move(hook), name(), "register_forward_pre_hook");
}

autograd::HookHandle Module::register_forward_hook(ForwardHook hook) {
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
  parameters_.emplace_back(name, std::move(value));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  buffers_.emplace_back(name, std::move(value));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, Module* child) {
  check_new_name(name);
  EMBER_CHECK(child != this, "[", this->name(), "] a module cannot be its own child");
  children_.emplace_back(name, child);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out(parameters_.begin(), parameters_.end());
  if (recurse)
    for (auto& [name, child] : children_)
      for (auto& [sub, t] : child->named_parameters(true)) out.emplace_back(name + "." + sub, t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, t] : buffers_)
    if (t.defined()) out.emplace_back(name, t);
  if (recurse)
    for (auto& [name, child] : children_)
      for (auto& [sub, t] : child->named_buffers(true)) out.emplace_back(name + "." + sub, t);
  return out;
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
}  // namespace

template <class Visit>
void Module::visit_tensors(bool params, bool buffers, Visit visit) {
  for (auto& [name, m] : named_modules()) {
    if (params)
      for (auto& [n, t] : m->parameters_) visit(t);
    if (buffers)
      for (auto& [n, t] : m->buffers_)
        if (t.defined()) visit(t);
  }
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  visit_tensors(true, true, [&](Tensor& t) {
    replace_data(t, t.to(device));
    if (t.grad().defined()) replace_data(t.grad(), t.grad().to(device));
  });
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  EMBER_CHECK(is_floating(dtype), "[", name(), "] to() expects a floating point dtype, got ", dtype);
  visit_tensors(true, true, [&](Tensor& t) {
    if (!is_floating(t.dtype())) return;
    replace_data(t, t.to(dtype));
    if (t.grad().defined()) replace_data(t.grad(), t.grad().to(dtype));
  });
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
  for (auto& [name, t] : named_parameters()) out[name] = t;
  for (auto& [name, t] : named_buffers()) out[name] = t;
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (auto& [key, t] : own) {
    auto it = state.find(key);
    if (it == state.end()) {
      missing.push_back(key);
    } else if (it->second.shape() != t.shape()) {
      mismatched.push_back(key + ": checkpoint " + shape_str(it->second.shape()) + " vs model " + shape_str(t.shape()));
    }
  }
  for (auto& [key, t] : state)
    if (!own.count(key)) unexpected.push_back(key);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::string problems;
  if (strict && !missing.empty()) problems += "\n  missing keys: " + join(missing);
  if (strict && !unexpected.empty()) problems += "\n  unexpected keys: " + join(unexpected);
  if (!mismatched.empty()) problems += "\n  shape mismatches: " + join(mismatched);
  EMBER_CHECK(problems.empty(), "[", name(), "] load_state_dict failed:", problems);
  NoGradGuard no_grad;
  for (auto& [key, t] : own) {
    auto it = state.find(key);
    if (it != state.end()) t.copy_(it->second);
  }
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
