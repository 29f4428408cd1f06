#include "optim/optimizer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "core/memory_category.h"
#include "core/ops.h"

namespace ember::optim {

namespace {

// "12" -> 12; anything else (empty, sign, trailing text) -> false.
bool parse_index(const std::string& text, size_t& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

// "state.3.exp_avg" -> {"state", "3", "exp_avg"}; false unless it has exactly that shape.
bool split_key(const std::string& key, std::string& section, std::string& index, std::string& field) {
  const size_t a = key.find('.');
  if (a == std::string::npos) return false;
  const size_t b = key.find('.', a + 1);
  if (b == std::string::npos) return false;
  section = key.substr(0, a);
  index = key.substr(a + 1, b - a - 1);
  field = key.substr(b + 1);
  return !field.empty();
}

std::string group_key(size_t group, const std::string& field) {
  return "param_groups." + std::to_string(group) + "." + field;
}

}  // namespace

Optimizer::Optimizer(std::string name, std::vector<std::vector<Tensor>> groups, std::vector<StateSpec> state_specs)
    : name_(std::move(name)), groups_(std::move(groups)), state_specs_(std::move(state_specs)) {
  size_t total = 0;
  for (const auto& group : groups_) total += group.size();
  EMBER_CHECK(total > 0, "[", name_, "] got an empty parameter list");
  std::set<const TensorImpl*> seen;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    EMBER_CHECK(!groups_[g].empty(), "[", name_, "] parameter group ", g, " is empty");
    for (const Tensor& p : groups_[g]) {
      EMBER_CHECK(p.defined(), "[", name_, "] parameter ", index, " (group ", g, ") is undefined");
      // A frozen parameter (requires_grad off, as fine-tuning leaves an encoder) is taken, as
      // PyTorch takes it: it gets no gradient, so step() skips it until it is unfrozen.
      EMBER_CHECK(is_floating(p.dtype()), "[", name_, "] parameter ", index, " (group ", g, ", shape ",
                  shape_str(p.shape()), ") is ", p.dtype(), "; only floating point tensors can be optimized");
      EMBER_CHECK(p.is_leaf(), "[", name_, "] parameter ", index, " (group ", g, ", shape ", shape_str(p.shape()),
                  ") is not a leaf tensor; optimize the tensor it was computed from");
      // Listed twice, a parameter would be updated twice per step.
      EMBER_CHECK(seen.insert(p.impl()).second, "[", name_, "] parameter ", index, " (group ", g,
                  ") appears more than once in the parameter list");
      // The optimizer knows its parameters even where no module registered them: Note [Memory by
      // category].
      memory::tag(p, MemoryCategory::Parameters);
      ++index;
    }
  }
  state_.resize(index);
}

int64_t Optimizer::full_state_bytes(Device device) const {
  int64_t bytes = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const HyperParams hyper = hyper_params(g);
    for (const Tensor& p : groups_[g]) {
      if (!p.requires_grad()) continue;
      for (const StateSpec& spec : state_specs_) {
        if (!spec.needed_when.empty() && hyper.at(spec.needed_when) == 0.0) continue;
        const bool like_param = spec.kind == StateKind::LikeParam;
        if ((like_param ? p.device() : kCPU) != device) continue;
        bytes += like_param ? p.numel() * static_cast<int64_t>(element_size(state_dtype(p)))
                            : static_cast<int64_t>(element_size(kInt64));
      }
    }
  }
  return bytes;
}

const StateSpec* Optimizer::spec_of(const std::string& name) const {
  auto it = std::find_if(state_specs_.begin(), state_specs_.end(), [&](const StateSpec& s) { return s.name == name; });
  return it == state_specs_.end() ? nullptr : &*it;
}

const Tensor& Optimizer::param(size_t index) const {
  size_t group = 0;
  while (index >= groups_[group].size()) index -= groups_[group++].size();
  return groups_[group][index];
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  check_group(group);
  return groups_[group];
}

void Optimizer::check_group(size_t group) const {
  EMBER_CHECK(group < groups_.size(), "[", name_, "] parameter group ", group, " does not exist (there are ",
              groups_.size(), ")");
}

void Optimizer::check_lr(double lr) const {
  EMBER_CHECK(std::isfinite(lr) && lr >= 0.0, "[", name_, "] invalid learning rate ", lr,
              " (expected a finite lr >= 0)");
}

size_t Optimizer::first_index(size_t group) const {
  size_t index = 0;
  for (size_t g = 0; g < group; ++g) index += groups_[g].size();
  return index;
}

bool Optimizer::takes_fused_step(size_t index, const Tensor& p, const Tensor& grad) const {
  if (!fused_step_accepts(p, grad)) return false;
  for (const auto& [name, value] : state_[index])
    if (spec_of(name)->kind == StateKind::LikeParam && !fused_step_accepts(p, value)) return false;
  return true;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const auto& group : groups_)
    for (const Tensor& p : group) {
      if (!p.grad().defined()) continue;
      if (set_to_none) p.set_grad(Tensor());
      else p.grad().zero_();
    }
}

double Optimizer::lr() const {
  const double first = group_lr(0);
  for (size_t g = 1; g < groups_.size(); ++g)
    EMBER_CHECK(group_lr(g) == first, "[", name_, "] lr(): parameter groups 0 and ", g,
                " have different learning rates (", first, " and ", group_lr(g), "); use group_lr(group)");
  return first;
}

double Optimizer::group_lr(size_t group) const { return group_hyper_param(group, "lr"); }

double Optimizer::group_hyper_param(size_t group, const std::string& name) const {
  check_group(group);
  const HyperParams values = hyper_params(group);
  const auto it = values.find(name);
  EMBER_CHECK(it != values.end(), "[", name_, "] has no hyper-parameter '", name, "'");
  return it->second;
}

void Optimizer::set_group_hyper_param(size_t group, const std::string& name, double value) {
  (void)group_hyper_param(group, name);  // the group and the name exist
  std::vector<HyperParams> all;
  for (size_t g = 0; g < groups_.size(); ++g) all.push_back(hyper_params(g));
  all[group][name] = value;
  set_hyper_params(all);
}

void Optimizer::set_lr(double lr) {
  check_lr(lr);
  std::vector<HyperParams> all;
  for (size_t g = 0; g < groups_.size(); ++g) {
    all.push_back(hyper_params(g));
    all.back()["lr"] = lr;
  }
  set_hyper_params(all);
}

void Optimizer::set_group_lr(size_t group, double lr) {
  check_group(group);
  check_lr(lr);
  set_group_hyper_param(group, "lr", lr);
}

StateDict Optimizer::state_dict() const {
  NoGradGuard no_grad;
  StateDict out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto first = static_cast<double>(first_index(g));
    out[group_key(g, "params")] = arange(first, first + static_cast<double>(groups_[g].size()), 1.0, kInt64);
    for (const auto& [name, value] : hyper_params(g)) out[group_key(g, name)] = scalar_tensor(value, kFloat64);
  }
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [name, value] : state_[i])
      out["state." + std::to_string(i) + "." + name] = value.clone();
  return out;
}

void Optimizer::check_state_entry(const std::string& key, size_t index, const std::string& name,
                                  const Tensor& value) const {
  const StateSpec* spec = spec_of(name);
  std::string known;
  for (const StateSpec& s : state_specs_) known += (known.empty() ? "" : ", ") + s.name;
  EMBER_CHECK(spec, "[", name_, "] load_state_dict: unexpected key '", key, "' (", name_,
              " keeps the per-parameter state: ", known.empty() ? "none" : known, ")");
  EMBER_CHECK(index < state_.size(), "[", name_, "] load_state_dict: key '", key, "' is for parameter ", index,
              ", but this optimizer has ", state_.size(), " parameters");
  const Shape expected = spec->kind == StateKind::LikeParam ? param(index).shape() : Shape{};
  EMBER_CHECK(value.defined() && value.shape() == expected, "[", name_, "] load_state_dict: '", key, "' has shape ",
              value.defined() ? shape_str(value.shape()) : "<undefined>", ", expected ", shape_str(expected),
              spec->kind == StateKind::LikeParam ? " (the shape of parameter " + std::to_string(index) + ")" : "");
}

void Optimizer::check_group_params(const std::string& key, size_t group, const Tensor& value) const {
  const auto first = static_cast<int64_t>(first_index(group));
  const auto size = static_cast<int64_t>(groups_[group].size());
  EMBER_CHECK(value.defined() && value.dim() == 1 && value.numel() == size, "[", name_, "] load_state_dict: ",
              "parameter group ", group, " has ", size, " parameters, the state dict's has ",
              value.defined() ? value.numel() : 0, " (a state dict for a different set of parameters?)");
  const std::vector<int64_t> ids = value.to_vector<int64_t>();
  for (int64_t k = 0; k < size; ++k)
    EMBER_CHECK(ids[static_cast<size_t>(k)] == first + k, "[", name_, "] load_state_dict: '", key,
                "' lists parameter ", ids[static_cast<size_t>(k)], " at position ", k, ", expected ", first + k);
}

std::vector<std::string> Optimizer::missing_entries(const ParamState& state, const HyperParams& hyper) const {
  std::vector<std::string> out;
  for (const StateSpec& spec : state_specs_)
    if ((spec.needed_when.empty() || hyper.at(spec.needed_when) != 0.0) && !state.count(spec.name))
      out.push_back(spec.name);
  return out;
}

std::vector<std::string> Optimizer::missing_state_keys() const {
  std::vector<std::string> out;
  for (size_t g = 0, i = 0; g < groups_.size(); ++g) {
    const HyperParams hyper = hyper_params(g);
    for (size_t k = 0; k < groups_[g].size(); ++k, ++i)
      if (groups_[g][k].requires_grad())
        for (const std::string& name : missing_entries(state_[i], hyper))
          out.push_back("state." + std::to_string(i) + "." + name);
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& dict) {
  NoGradGuard no_grad;
  std::set<std::string> hyper_names;
  for (const auto& [name, value] : hyper_params(0)) hyper_names.insert(name);

  // First pass: read and check everything, changing nothing.
  std::vector<HyperParams> hypers(groups_.size());
  std::vector<bool> has_params(groups_.size(), false);
  std::vector<ParamState> next(state_.size());
  for (const auto& [key, value] : dict) {
    std::string section, index_text, field;
    size_t index = 0;
    EMBER_CHECK(split_key(key, section, index_text, field) && parse_index(index_text, index) &&
                    (section == "param_groups" || section == "state"),
                "[", name_, "] load_state_dict: unexpected key '", key,
                "' (expected param_groups.<group>.<name> or state.<parameter>.<name>)");
    if (section == "state") {
      check_state_entry(key, index, field, value);
      next[index][field] = value;
      continue;
    }
    EMBER_CHECK(index < groups_.size(), "[", name_, "] load_state_dict: key '", key, "' is for parameter group ",
                index, ", but this optimizer has ", groups_.size(), " groups");
    if (field == "params") {
      check_group_params(key, index, value);
      has_params[index] = true;
      continue;
    }
    EMBER_CHECK(hyper_names.count(field), "[", name_, "] load_state_dict: unexpected key '", key, "' (",
                field, " is not a hyper-parameter of ", name_, ")");
    EMBER_CHECK(value.defined() && value.numel() == 1, "[", name_, "] load_state_dict: '", key,
                "' must hold one number");
    hypers[index][field] = value.item();
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    EMBER_CHECK(has_params[g], "[", name_, "] load_state_dict: missing key '", group_key(g, "params"), "' (this ",
                name_, " has ", groups_.size(), " parameter groups)");
    for (const std::string& name : hyper_names)
      EMBER_CHECK(hypers[g].count(name), "[", name_, "] load_state_dict: missing key '", group_key(g, name), "'");
  }
  for (size_t g = 0, i = 0; g < groups_.size(); ++g)
    for (size_t k = 0; k < groups_[g].size(); ++k, ++i)
      if (!next[i].empty())
        for (const std::string& name : missing_entries(next[i], hypers[g]))
          EMBER_FAIL("[", name_, "] load_state_dict: missing key 'state.", i, ".", name, "': parameter ", i,
                     " has state, and its next step needs ", name);
  set_hyper_params(hypers);  // checks the values before it assigns any

  // Second pass: own copies, on the parameters' devices.
  for (size_t i = 0; i < next.size(); ++i) {
    const Tensor& p = param(i);
    for (auto& [name, value] : next[i]) {
      value = spec_of(name)->kind == StateKind::LikeParam ? value.to(p.device()).to(state_dtype(p)).clone()
                                                          : value.to(kCPU).to(kInt64).clone();
      memory::tag(value, MemoryCategory::OptimizerState);
    }
  }
  state_ = std::move(next);
}

}  // namespace ember::optim
