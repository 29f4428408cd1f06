#pragma once
// Note [Optimizers and parameter groups]
// An optimizer updates parameters in place from their .grad. The parameters come in groups, each
// with its own hyper-parameters (an `Options` struct such as SGDOptions: lr, momentum, ...), so one
// model can train its biases at another learning rate than its weights:
//     optim::SGD opt(model.parameters(), optim::SGDOptions(0.1).momentum(0.9));
//     optim::SGD opt({{{fc.weight}, optim::SGDOptions(0.1)}, {{fc.bias}, optim::SGDOptions(0.01)}});
// The work is split in three layers so no optimizer repeats the bookkeeping:
//   - Optimizer: what does not depend on the options type — the groups' parameters, the
//     per-parameter state, zero_grad, lr access for schedulers, state_dict/load_state_dict;
//   - OptimizerWith<Options>: stores one Options per group and exposes it to the base by name
//     (Options::fields lists every hyper-parameter once);
//   - SGD, Adam, AdamW, ...: the constructor's checks and the update rule, step(), written twice:
//     as composed tensor ops (the reference) and as the rule of the fused kernel, which updates
//     a group's parameters in one pass (Note [Multi-tensor optimizer updates] in
//     core/optimizer_step.h); the option `fused` (default on) picks the kernel.
// Parameters are numbered 0, 1, ... in group order; that index names their state.
//
// Note [Optimizer state_dict]
// state_dict() returns a flat std::map<std::string, Tensor> (nn::StateDict, so it can be written
// with the same serializer as a model's weights):
//     param_groups.<g>.params   int64 [n]  the indices of group g's parameters
//     param_groups.<g>.<name>   float64 [] every hyper-parameter of group g (lr, momentum, ...;
//                                          booleans as 0 or 1)
//     state.<i>.<name>                     parameter i's state: float tensors shaped like the
//                                          parameter (momentum_buffer, exp_avg, ...; float32 for
//                                          a 16-bit parameter) and int64
//                                          0-d counters (step), only once they exist
// `fused` is not in the dict: it changes how the step is computed, not what.
// The tensors are copies: stepping on does not change a saved dict. load_state_dict() checks the
// whole dict against this optimizer (group sizes, state names and shapes, every hyper-parameter
// present, no unknown key) before it changes anything, then copies the state onto the device of
// each parameter, in its state_dtype; the hyper-parameters of the dict replace the optimizer's,
// as PyTorch.
#include <cstddef>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/check.h"
#include "core/memory_phase.h"
#include "core/tensor.h"
#include "nn/module.h"
#include "optim/float32_copies.h"
#include "optim/fused_batches.h"

namespace ember::optim {

using nn::StateDict;

template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

// How one named piece of per-parameter state is stored, so a loaded dict can be checked.
enum class StateKind {
  LikeParam,  // the parameter's shape, dtype and device
  Counter,    // a 0-d int64 CPU tensor: read on the host every step, so it lives there
};
struct StateSpec {
  std::string name;
  StateKind kind;
  // The hyper-parameter that must be nonzero for a step to make this entry (momentum_buffer:
  // "momentum"); empty: every step makes it. load_state_dict uses it to refuse a parameter's
  // state that lacks an entry the next step would need.
  std::string needed_when = {};
};

class Optimizer {
 public:
  using HyperParams = std::map<std::string, double>;

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter whose .grad is defined (the others are skipped, as PyTorch).
  virtual void step() = 0;
  // set_to_none: drop the gradients (the next backward allocates fresh ones); else zero them.
  void zero_grad(bool set_to_none = true);

  const std::string& name() const { return name_; }
  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group) const;

  // The learning rate shared by all groups; an error when the groups differ (use group_lr).
  double lr() const;
  void set_lr(double lr);  // every group
  double group_lr(size_t group) const;
  void set_group_lr(size_t group, double lr);

  // Any hyper-parameter by its state_dict name (lr, momentum, beta1, ...), for schedulers that
  // move more than the lr (OneCycleLR's momentum). set_group_hyper_param checks the new value
  // with the optimizer's own checks.
  bool has_hyper_param(const std::string& name) const { return hyper_params(0).count(name) != 0; }
  double group_hyper_param(size_t group, const std::string& name) const;
  void set_group_hyper_param(size_t group, const std::string& name, double value);

  StateDict state_dict() const;
  // Refuses a parameter whose state has some entries but lacks one its next step needs (a
  // damaged dict would otherwise restart that moment from zero, silently).
  void load_state_dict(const StateDict& state);
  // The state_dict keys ("state.<i>.<name>") that a parameter which has stepped would hold and
  // this optimizer lacks, over the parameters that require grad: after a resume from a run that
  // took steps, a non-empty list means the dict lost a parameter's state.
  std::vector<std::string> missing_state_keys() const;
  // The bytes this optimizer's state holds on `device` once every parameter that requires grad
  // has stepped, with the hyper-parameters as they are now: what a memory plan made before the
  // first step must leave room for (utils/limit_plan.h).
  int64_t full_state_bytes(Device device) const;

 protected:
  using ParamState = std::map<std::string, Tensor>;

  Optimizer(std::string name, std::vector<std::vector<Tensor>> groups, std::vector<StateSpec> state_specs);

  ParamState& state(size_t param_index) { return state_[param_index]; }
  void check_group(size_t group) const;
  void check_lr(double lr) const;
  // Whether parameter p (number `index`) can take the fused step with `grad`: the grad and every
  // state tensor shaped like it pass fused_step_accepts.
  bool takes_fused_step(size_t index, const Tensor& p, const Tensor& grad) const;

 private:
  // Implemented once, by OptimizerWith<Options>.
  virtual HyperParams hyper_params(size_t group) const = 0;
  // Checks every group's new values and only then assigns them all.
  virtual void set_hyper_params(const std::vector<HyperParams>& groups) = 0;

  size_t first_index(size_t group) const;
  const Tensor& param(size_t index) const;  // by index across the groups
  const StateSpec* spec_of(const std::string& name) const;  // nullptr: not a state of this optimizer
  void check_group_params(const std::string& key, size_t group, const Tensor& value) const;
  void check_state_entry(const std::string& key, size_t index, const std::string& name, const Tensor& value) const;
  // The entries a step under `hyper` makes that `state` lacks.
  std::vector<std::string> missing_entries(const ParamState& state, const HyperParams& hyper) const;

  std::string name_;
  std::vector<std::vector<Tensor>> groups_;
  std::vector<StateSpec> state_specs_;
  std::vector<ParamState> state_;  // by parameter index
};

// The per-group options of one optimizer type. `Options` provides
//   double lr_;                                       the learning rate
//   bool fused_;                                      the fused step, or the composed one
//   void check(const std::string& optimizer) const;   rejects invalid hyper-parameters
//   template <class Self, class Visit>
//   static void fields(Self& options, Visit&& visit); visit("name", options.field_) for each one
template <class Options>
class OptimizerWith : public Optimizer {
 public:
  using Group = ParamGroup<Options>;

  const Options& options(size_t group) const {
    check_group(group);
    return options_[group];
  }
  void set_options(size_t group, const Options& options) {
    check_group(group);
    check_options(options);
    options_[group] = options;
  }

 protected:
  OptimizerWith(std::string name, const std::vector<Group>& groups, std::vector<StateSpec> state_specs)
      : Optimizer(std::move(name), params_of(groups), std::move(state_specs)) {
    for (const Group& g : groups) {
      check_options(g.options);
      options_.push_back(g.options);
    }
  }

  // One update of every parameter whose .grad is defined, under NoGradGuard: the update is not
  // part of any graph (Note [In-place ops and autograd]). In a group with `fused` on, the
  // parameters that takes_fused_step are prepared by fused(param, grad, options, state), which
  // makes their state and returns their FusedParam, and updated together by rule(options), one
  // fused_optimizer_step per device and dtype. The others, and every parameter of a group with
  // `fused` off, go through reference(param, grad, options, state), the composed update.
  // A 16-bit parameter steps as a float32 copy (Note [Sixteen-bit parameters step in float32]).
  template <class Rule, class Fused, class Reference>
  void step_params(Rule rule, Fused fused, Reference reference) {
    NoGradGuard no_grad;
    const memory::PhaseGuard phase("optimizer step");
    size_t index = 0;
    for (size_t g = 0; g < num_param_groups(); ++g) {
      const Options& o = options_[g];
      FusedBatches batches;
      Float32Copies copies;
      for (const Tensor& param : params(g)) {
        if (param.grad().defined()) {
          const Float32Copies::Work work = copies.prepare(param);
          if (o.fused_ && takes_fused_step(index, work.param, work.grad))
            batches.add(fused(work.param, work.grad, o, state(index)));
          else reference(work.param, work.grad, o, state(index));
        }
        ++index;
      }
      batches.run(rule(o));
      copies.write_back();
    }
  }

 private:
  static std::vector<std::vector<Tensor>> params_of(const std::vector<Group>& groups) {
    std::vector<std::vector<Tensor>> out;
    for (const Group& g : groups) out.push_back(g.params);
    return out;
  }

  void check_options(const Options& options) const {
    check_lr(options.lr_);
    options.check(name());
  }

  HyperParams hyper_params(size_t group) const override {
    HyperParams out;
    Options::fields(options_[group],
                    [&](const char* key, const auto& value) { out[key] = static_cast<double>(value); });
    return out;
  }

  void set_hyper_params(const std::vector<HyperParams>& groups) override {
    std::vector<Options> next = options_;
    for (size_t g = 0; g < next.size(); ++g) {
      Options::fields(next[g], [&](const char* key, auto& value) {
        value = static_cast<std::remove_reference_t<decltype(value)>>(groups[g].at(key));
      });
      check_options(next[g]);
    }
    options_ = std::move(next);
  }

  std::vector<Options> options_;
};

}  // namespace ember::optim
