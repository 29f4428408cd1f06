#pragma once
// Adam, and what it shares with AdamW (optim/adamw.h): the hyper-parameters, the per-parameter
// state and the update itself (Note [Adam update] in adam.cpp). The two differ only in how
// weight decay enters.
#include <array>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace ember::optim {

// The hyper-parameters of Adam and AdamW, as plain data; the options types below add chainable
// setters and their own defaults.
struct AdamHyperParams {
  double lr_;
  double beta1_ = 0.9;
  double beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_;
  bool amsgrad_ = false;

  void check(const std::string& optimizer) const;
  template <class Self, class Visit>
  static void fields(Self& o, Visit&& visit) {
    visit("lr", o.lr_);
    visit("beta1", o.beta1_);
    visit("beta2", o.beta2_);
    visit("eps", o.eps_);
    visit("weight_decay", o.weight_decay_);
    visit("amsgrad", o.amsgrad_);
  }
};

// Setters that return the concrete options type, so AdamWOptions(1e-3).betas(...).amsgrad(true)
// stays an AdamWOptions. fused(false) runs the composed update instead of the fused kernel (Note
// [Multi-tensor optimizer updates] in core/optimizer_step.h); both give the same bits on the CPU.
template <class Options>
struct AdamOptionsBase : AdamHyperParams {
  AdamOptionsBase(double lr, double weight_decay) : AdamHyperParams{lr, 0.9, 0.999, 1e-8, weight_decay, false} {}
  Options& lr(double v) { lr_ = v; return self(); }
  Options& betas(std::array<double, 2> v) { beta1_ = v[0]; beta2_ = v[1]; return self(); }
  Options& eps(double v) { eps_ = v; return self(); }
  Options& weight_decay(double v) { weight_decay_ = v; return self(); }
  Options& amsgrad(bool v) { amsgrad_ = v; return self(); }
  Options& fused(bool v) { fused_ = v; return self(); }

  bool fused_ = true;  // not a hyper-parameter: not in fields()

 private:
  Options& self() { return static_cast<Options&>(*this); }
};

// AdamOptions(1e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(0).amsgrad(false): the defaults
// of torch.optim.Adam.
struct AdamOptions : AdamOptionsBase<AdamOptions> {
  explicit AdamOptions(double lr = 1e-3) : AdamOptionsBase(lr, 0.0) {}
};

// How weight decay enters the update (Note [Adam update]).
enum class WeightDecayMode {
  Coupled,    // Adam: an L2 term added to the gradient, so it goes through the moments
  Decoupled,  // AdamW: the parameter shrinks directly, beside the moments
};

// The state of one parameter: step (int64 counter), exp_avg, exp_avg_sq, and max_exp_avg_sq with
// amsgrad; the names of torch's state dicts.
std::vector<StateSpec> adam_state_specs();
// One step of the parameters of an Adam or AdamW (OptimizerWith::step_params's arguments): the
// rule of a group for the fused kernel, a parameter's part of the fused step (its state made
// and its step counted), and the composed update of one parameter (the reference).
AdamRule adam_rule(const AdamHyperParams& o, WeightDecayMode mode);
FusedParam adam_fused(const Tensor& p, const Tensor& g, const AdamHyperParams& o, std::map<std::string, Tensor>& state);
void adam_reference(const Tensor& p, const Tensor& g, const AdamHyperParams& o, std::map<std::string, Tensor>& state,
                    WeightDecayMode mode);

using AdamParamGroup = ParamGroup<AdamOptions>;

// Adam, as torch.optim.Adam: weight decay is L2 regularisation added to the gradient.
class Adam : public OptimizerWith<AdamOptions> {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options)
      : Adam(std::vector<AdamParamGroup>{{std::move(params), options}}) {}
  explicit Adam(const std::vector<AdamParamGroup>& groups);
  void step() override;
};

}  // namespace ember::optim
