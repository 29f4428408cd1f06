#include "nn/loss.h"

#include <cmath>

#include "nn/repr.h"

namespace ember::nn {

std::string reduction_repr(Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return "'none'";
    case Reduction::Sum: return "'sum'";
    case Reduction::Mean: return "'mean'";
  }
  return "?";
}

namespace {
// "weight=[3], " for a defined tensor setting, "" for an undefined one: the shape says what the
// weights apply to without printing them all.
std::string tensor_setting(const char* name, const Tensor& t) {
  return t.defined() ? detail::concat(name, "=", shape_str(t.shape()), ", ") : "";
}
}  // namespace

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyLossOptions options) : options(options) {
  if (options.weight.defined()) weight = register_buffer("weight", options.weight);
}

std::string CrossEntropyLoss::extra_repr() const {
  return detail::concat(tensor_setting("weight", weight), "ignore_index=", options.ignore_index,
                        ", reduction=", reduction_repr(options.reduction), ", label_smoothing=", options.label_smoothing);
}

NLLLoss::NLLLoss(NLLLossOptions options) : ignore_index(options.ignore_index), reduction(options.reduction) {
  if (options.weight.defined()) weight = register_buffer("weight", options.weight);
}

std::string NLLLoss::extra_repr() const {
  return detail::concat(tensor_setting("weight", weight), "ignore_index=", ignore_index,
                        ", reduction=", reduction_repr(reduction));
}

BCELoss::BCELoss(Tensor w, Reduction reduction) : reduction(reduction) {
  if (w.defined()) weight = register_buffer("weight", std::move(w));
}

std::string BCELoss::extra_repr() const {
  return detail::concat(tensor_setting("weight", weight), "reduction=", reduction_repr(reduction));
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BCEWithLogitsLossOptions options) : reduction(options.reduction) {
  if (options.weight.defined()) weight = register_buffer("weight", options.weight);
  if (options.pos_weight.defined()) pos_weight = register_buffer("pos_weight", options.pos_weight);
}

std::string BCEWithLogitsLoss::extra_repr() const {
  return detail::concat(tensor_setting("weight", weight), tensor_setting("pos_weight", pos_weight),
                        "reduction=", reduction_repr(reduction));
}

std::string MSELoss::extra_repr() const { return "reduction=" + reduction_repr(reduction); }

std::string L1Loss::extra_repr() const { return "reduction=" + reduction_repr(reduction); }

SmoothL1Loss::SmoothL1Loss(Reduction reduction, double beta) : reduction(reduction), beta(beta) {
  EMBER_CHECK(std::isfinite(beta) && beta >= 0.0, "[SmoothL1Loss] beta must be finite and >= 0, got ", beta);
}

std::string SmoothL1Loss::extra_repr() const {
  return detail::concat("reduction=", reduction_repr(reduction), ", beta=", beta);
}

HuberLoss::HuberLoss(Reduction reduction, double delta) : reduction(reduction), delta(delta) {
  EMBER_CHECK(std::isfinite(delta) && delta > 0.0, "[HuberLoss] delta must be finite and > 0, got ", delta);
}

std::string HuberLoss::extra_repr() const {
  return detail::concat("reduction=", reduction_repr(reduction), ", delta=", delta);
}

}  // namespace ember::nn
