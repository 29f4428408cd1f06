#include "optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "core/autograd/grad_mode.h"
#include "core/grad_unscale.h"
#include "core/ops.h"

namespace ember::optim {

namespace {

constexpr const char* kName = "GradScaler";

// The value as float32 holds it, or NaN for one past float32's range (whose conversion C++
// leaves undefined).
float as_float32(double v) { return holds_value(kFloat32, v) ? static_cast<float>(v) : std::nanf(""); }

// S is kept in float32, as PyTorch keeps it, and the factors multiply it there: each option is
// checked as float32 holds it, so 1e-50 (0 in float32) is no scale and 1 + 1e-9 (1 in float32)
// no growth.
void check_scale(double scale, const char* where, const char* option) {
  EMBER_CHECK(std::isfinite(as_float32(scale)) && as_float32(scale) > 0.0f, "[", kName, "] ", where, ": ",
              option, " must be finite and > 0 in float32, where the scale is kept; got ", scale,
              scale > 0.0 ? " (0 in float32)" : "");
}

void check_options(const GradScalerOptions& o, const char* where) {
  check_scale(o.init_scale_, where, "init_scale");
  const float growth = as_float32(o.growth_factor_), backoff = as_float32(o.backoff_factor_);
  EMBER_CHECK(std::isfinite(growth) && growth > 1.0f, "[", kName, "] ", where,
              ": growth_factor must be finite and > 1 in float32, where it multiplies the scale; got ",
              o.growth_factor_);
  EMBER_CHECK(backoff > 0.0f && backoff < 1.0f, "[", kName, "] ", where,
              ": backoff_factor must be in (0, 1) in float32, where it multiplies the scale; got ", o.backoff_factor_);
  EMBER_CHECK(o.growth_interval_ >= 1, "[", kName, "] ", where, ": growth_interval must be >= 1, got ",
              o.growth_interval_);
}

const std::set<std::string> kStateKeys = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                                          "_growth_tracker"};

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) { check_options(options_, "options"); }

float GradScaler::current_scale(const char* call) const {
  EMBER_CHECK(scale_.has_value(), "[", kName, "] ", call,
              "() was called before scale(): scale the loss with scaler.scale(loss) before backward");
  return *scale_;
}

double GradScaler::get_scale() const {
  if (!options_.enabled_) return 1.0;
  return scale_ ? *scale_ : static_cast<float>(options_.init_scale_);
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!options_.enabled_) return outputs;
  EMBER_CHECK(outputs.defined() && is_floating(outputs.dtype()), "[", kName, "] scale() expects a floating tensor, got ",
              outputs.defined() ? dtype_name(outputs.dtype()) : std::string("an undefined tensor"));
  if (!scale_) scale_ = static_cast<float>(options_.init_scale_);
  return outputs * static_cast<double>(*scale_);
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled_) return;
  const float s = current_scale("unscale_");
  OptimizerRecord& record = records_[&optimizer];
  EMBER_CHECK(record.stage != Stage::Unscaled, "[", kName, "] unscale_() has already been called on this ",
              optimizer.name(), " since the last update()");
  EMBER_CHECK(record.stage != Stage::Stepped, "[", kName, "] unscale_() was called after step() on this ",
              optimizer.name(), "; unscale before the step, and call update() to start the next iteration");

  // The gradients of each device, unscaled together.
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  size_t index = 0;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    for (const Tensor& p : optimizer.params(g)) {
      const Tensor& grad = p.grad();
      if (grad.defined()) {
        EMBER_CHECK(grad.dtype() != kFloat16, "[", kName, "] unscale_: parameter ", index, " (shape ",
                    shape_str(p.shape()), ") of the ", optimizer.name(),
                    " has a float16 gradient; unscaled in float16 it would underflow again. Keep the parameters in "
                    "float32 and compute in float16 under Autocast");
        auto same = [&](const auto& entry) { return entry.first == grad.device(); };
        auto entry = std::find_if(by_device.begin(), by_device.end(), same);
        if (entry == by_device.end()) entry = by_device.insert(by_device.end(), {grad.device(), {}});
        entry->second.push_back(grad);
      }
      ++index;
    }
  // The reciprocal in double, rounded to float32 once: PyTorch's inv_scale.
  const double inv_scale = static_cast<float>(1.0 / static_cast<double>(s));
  NoGradGuard no_grad;
  record.found_inf.clear();
  for (const auto& [device, grads] : by_device) {
    Tensor found_inf = zeros({1}, TensorOptions(kFloat32).with_device(device));
    non_finite_check_and_unscale_(grads, found_inf, inv_scale);
    record.found_inf.push_back(found_inf);
  }
  record.stage = Stage::Unscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled_) {
    optimizer.step();
    return true;
  }
  (void)current_scale("step");
  EMBER_CHECK(records_[&optimizer].stage != Stage::Stepped, "[", kName, "] step() has already been called on this ",
              optimizer.name(), " since the last update()");
  if (records_[&optimizer].stage == Stage::Ready) unscale_(optimizer);
  OptimizerRecord& record = records_[&optimizer];
  EMBER_CHECK(!record.found_inf.empty(), "[", kName, "] step(): none of the ", optimizer.name(),
              "'s parameters has a gradient, so there is nothing to check for inf or NaN; call backward first");
  double found = 0.0;
  for (const Tensor& f : record.found_inf) found += f.item();  // the one read back of the step
  const bool stepping = found == 0.0;
  if (stepping) optimizer.step();
  record.stage = Stage::Stepped;
  return stepping;
}

void GradScaler::update() {
  if (!options_.enabled_) return;
  const float s = current_scale("update");
  bool found = false, checked = false;
  for (const auto& [optimizer, record] : records_)
    for (const Tensor& f : record.found_inf) {
      checked = true;
      found = found || f.item() != 0.0;
    }
  EMBER_CHECK(checked, "[", kName, "] update() was called, but no gradients were unscaled since the last update(); "
                       "call step(optimizer) (or unscale_) first");
  if (found) {
    scale_ = static_cast<float>(static_cast<double>(s) * options_.backoff_factor_);
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval_) {
    // Grown past float32's range, S would be inf and every later step would be skipped.
    const auto grown = static_cast<float>(static_cast<double>(s) * options_.growth_factor_);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  records_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled_) return;
  (void)current_scale("update");
  check_scale(new_scale, "update(new_scale)", "the new scale");
  scale_ = static_cast<float>(new_scale);
  records_.clear();
}

StateDict GradScaler::state_dict() const {
  if (!options_.enabled_) return {};
  return {{"scale", scalar_tensor(get_scale(), kFloat64)},
          {"growth_factor", scalar_tensor(options_.growth_factor_, kFloat64)},
          {"backoff_factor", scalar_tensor(options_.backoff_factor_, kFloat64)},
          {"growth_interval", scalar_tensor(static_cast<double>(options_.growth_interval_), kInt64)},
          {"_growth_tracker", scalar_tensor(static_cast<double>(growth_tracker_), kInt64)}};
}

void GradScaler::load_state_dict(const StateDict& state) {
  if (!options_.enabled_) return;
  EMBER_CHECK(!state.empty(), "[", kName, "] load_state_dict: the state dict is empty; was it saved by a disabled "
                              "GradScaler?");
  for (const auto& [key, value] : state) {
    EMBER_CHECK(kStateKeys.count(key), "[", kName, "] load_state_dict: unexpected key '", key,
                "' (expected scale, growth_factor, backoff_factor, growth_interval, _growth_tracker)");
    EMBER_CHECK(value.defined() && value.numel() == 1, "[", kName, "] load_state_dict: '", key,
                "' must hold one number");
  }
  for (const std::string& key : kStateKeys)
    EMBER_CHECK(state.count(key), "[", kName, "] load_state_dict: missing key '", key, "'");
  GradScalerOptions next = options_;
  next.init_scale_ = state.at("scale").item();
  next.growth_factor_ = state.at("growth_factor").item();
  next.backoff_factor_ = state.at("backoff_factor").item();
  next.growth_interval_ = state.at("growth_interval").item<int64_t>();
  const auto tracker = state.at("_growth_tracker").item<int64_t>();
  check_options(next, "load_state_dict");
  EMBER_CHECK(tracker >= 0 && tracker < next.growth_interval_, "[", kName, "] load_state_dict: _growth_tracker ",
              tracker, " must be in [0, growth_interval ", next.growth_interval_, ")");
  options_ = next;
  scale_ = static_cast<float>(next.init_scale_);
  growth_tracker_ = tracker;
}

}  // namespace ember::optim
