#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace ember::optim {

namespace {
std::vector<double> current_lrs(const Optimizer& optimizer) {
  std::vector<double> out;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) out.push_back(optimizer.group_lr(g));
  return out;
}
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : LRScheduler(optimizer, current_lrs(optimizer)) {}

LRScheduler::LRScheduler(Optimizer& optimizer, std::vector<double> base_lrs)
    : optimizer_(optimizer), base_lrs_(std::move(base_lrs)) {}

void LRScheduler::step() {
  EMBER_CHECK(epoch_ < std::numeric_limits<int64_t>::max(), "[LRScheduler] step: the epoch counter is at its "
              "largest value, ", epoch_, ", and cannot advance");
  apply(epoch_ + 1, base_lrs_);
}

StateDict LRScheduler::state_dict() const {
  return {{"last_epoch", scalar_tensor(static_cast<double>(epoch_), kInt64)},
          {"base_lrs", from_vector(base_lrs_, {static_cast<int64_t>(base_lrs_.size())}, kFloat64)}};
}

void LRScheduler::load_state_dict(const StateDict& state) {
  for (const auto& [key, value] : state)
    EMBER_CHECK(key == "last_epoch" || key == "base_lrs", "[LRScheduler] load_state_dict: unexpected key '", key,
                "' (expected last_epoch and base_lrs)");
  const auto find = [&](const char* key) -> const Tensor& {
    const auto it = state.find(key);
    EMBER_CHECK(it != state.end() && it->second.defined(), "[LRScheduler] load_state_dict: missing key '", key, "'");
    return it->second;
  };
  const Tensor& epoch = find("last_epoch");
  EMBER_CHECK(epoch.dim() == 0 && epoch.dtype() == kInt64, "[LRScheduler] load_state_dict: 'last_epoch' must be a "
              "0-d int64 tensor, got shape ", shape_str(epoch.shape()), " and dtype ", epoch.dtype());
  const int64_t last_epoch = epoch.item<int64_t>();
  EMBER_CHECK(last_epoch >= 0, "[LRScheduler] load_state_dict: 'last_epoch' must not be negative, got ", last_epoch);
  const Tensor& base = find("base_lrs");
  EMBER_CHECK(base.shape() == Shape{static_cast<int64_t>(base_lrs_.size())}, "[LRScheduler] load_state_dict: "
              "'base_lrs' has shape ", shape_str(base.shape()), " but the optimizer has ", base_lrs_.size(),
              " parameter group(s)");
  std::vector<double> base_lrs = base.to_vector<double>();
  for (double lr : base_lrs)
    EMBER_CHECK(std::isfinite(lr) && lr >= 0.0, "[LRScheduler] load_state_dict: invalid base lr ", lr);
  apply(last_epoch, std::move(base_lrs));
}

void LRScheduler::apply(int64_t epoch, std::vector<double> base_lrs) {
  std::vector<double> lrs;
  for (double base_lr : base_lrs) lrs.push_back(lr_at(epoch, base_lr));
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_group_lr(g, lrs[g]);
  apply_extras(epoch);
  last_lr_ = std::move(lrs);
  base_lrs_ = std::move(base_lrs);
  epoch_ = epoch;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size >= 1, "[StepLR] step_size must be at least 1, got ", step_size);
  EMBER_CHECK(std::isfinite(gamma) && gamma >= 0.0, "[StepLR] gamma must be finite and >= 0, got ", gamma);
  start();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  EMBER_CHECK(T_max >= 1, "[CosineAnnealingLR] T_max must be at least 1, got ", T_max);
  EMBER_CHECK(std::isfinite(eta_min) && eta_min >= 0.0, "[CosineAnnealingLR] eta_min must be finite and >= 0, got ",
              eta_min);
  start();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1.0 + std::cos(phase)) / 2.0;
}

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor)
    : LRScheduler(optimizer), warmup_steps_(warmup_steps), start_factor_(start_factor) {
  EMBER_CHECK(warmup_steps >= 1, "[LinearWarmup] warmup_steps must be at least 1, got ", warmup_steps);
  EMBER_CHECK(start_factor > 0.0 && start_factor <= 1.0, "[LinearWarmup] start_factor must be in (0, 1], got ",
              start_factor);
  start();
}

double LinearWarmup::lr_at(int64_t epoch, double base_lr) const {
  const double done = static_cast<double>(std::min(epoch, warmup_steps_)) / static_cast<double>(warmup_steps_);
  return base_lr * (start_factor_ + (1.0 - start_factor_) * done);
}

namespace {
std::vector<int64_t> sorted_milestones(std::vector<int64_t> milestones) {
  for (int64_t m : milestones) EMBER_CHECK(m >= 0, "[MultiStepLR] milestones must be >= 0, got ", m);
  std::sort(milestones.begin(), milestones.end());
  return milestones;
}
}  // namespace

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(sorted_milestones(std::move(milestones))), gamma_(gamma) {
  EMBER_CHECK(std::isfinite(gamma) && gamma >= 0.0, "[MultiStepLR] gamma must be finite and >= 0, got ", gamma);
  start();
}

double MultiStepLR::lr_at(int64_t epoch, double base_lr) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(passed));
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {
  EMBER_CHECK(static_cast<bool>(lr_lambda_), "[LambdaLR] lr_lambda is empty");
  start();
}

double LambdaLR::lr_at(int64_t epoch, double base_lr) const {
  const double factor = lr_lambda_(epoch);
  EMBER_CHECK(std::isfinite(factor) && factor >= 0.0, "[LambdaLR] lr_lambda(", epoch, ") returned ", factor,
              " (expected a finite factor >= 0)");
  return base_lr * factor;
}

namespace {
std::vector<double> checked_max_lrs(const Optimizer& optimizer, std::vector<double> max_lrs) {
  EMBER_CHECK(max_lrs.size() == optimizer.num_param_groups(), "[OneCycleLR] expected ", optimizer.num_param_groups(),
              " max_lr values (one per parameter group), got ", max_lrs.size());
  for (double lr : max_lrs)
    EMBER_CHECK(std::isfinite(lr) && lr >= 0.0, "[OneCycleLR] max_lr must be finite and >= 0, got ", lr);
  return max_lrs;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.num_param_groups(), max_lr), total_steps, options) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       OneCycleLROptions options)
    : LRScheduler(optimizer, checked_max_lrs(optimizer, std::move(max_lrs))),
      total_steps_(total_steps),
      options_(options) {
  const OneCycleLROptions& o = options_;
  check_enum(o.anneal_strategy_, AnnealStrategy::Linear, "OneCycleLR", "anneal_strategy");
  EMBER_CHECK(total_steps >= 1, "[OneCycleLR] total_steps must be at least 1, got ", total_steps);
  EMBER_CHECK(o.pct_start_ >= 0.0 && o.pct_start_ <= 1.0, "[OneCycleLR] pct_start must be in [0, 1], got ",
              o.pct_start_);
  EMBER_CHECK(std::isfinite(o.div_factor_) && o.div_factor_ > 0.0, "[OneCycleLR] div_factor must be finite and > 0, got ",
              o.div_factor_);
  EMBER_CHECK(std::isfinite(o.final_div_factor_) && o.final_div_factor_ > 0.0,
              "[OneCycleLR] final_div_factor must be finite and > 0, got ", o.final_div_factor_);
  const double lo = o.base_momentum_, hi = o.max_momentum_, steps = static_cast<double>(total_steps);
  if (o.three_phase_)
    phases_ = {{o.pct_start_ * steps - 1, Level::Initial, Level::Max, hi, lo},
               {2 * o.pct_start_ * steps - 2, Level::Max, Level::Initial, lo, hi},
               {steps - 1, Level::Initial, Level::Min, hi, hi}};
  else
    phases_ = {{o.pct_start_ * steps - 1, Level::Initial, Level::Max, hi, lo},
               {steps - 1, Level::Max, Level::Min, lo, hi}};
  // A phase that ends where it starts would divide by zero in position().
  double start_step = 0;
  for (size_t k = 0; k < phases_.size(); ++k) {
    EMBER_CHECK(phases_[k].end_step != start_step, "[OneCycleLR] phase ", k + 1, " of the schedule is empty (pct_start ",
                o.pct_start_, " with total_steps ", total_steps, "); choose another pct_start");
    start_step = phases_[k].end_step;
  }
  if (o.cycle_momentum_) {
    for (const char* name : {"momentum", "beta1"})
      if (optimizer.has_hyper_param(name)) {
        momentum_name_ = name;
        break;
      }
    EMBER_CHECK(!momentum_name_.empty(), "[OneCycleLR] cycle_momentum needs an optimizer with momentum or betas; ",
                optimizer.name(), " has neither (turn cycle_momentum off)");
    EMBER_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo >= 0.0 && hi >= 0.0,
                "[OneCycleLR] base_momentum and max_momentum must be finite and >= 0, got ", lo, " and ", hi);
  }
  start();
}

OneCycleLR::Position OneCycleLR::position(int64_t epoch) const {
  EMBER_CHECK(epoch <= total_steps_, "[OneCycleLR] stepped to epoch ", epoch, ", past total_steps = ", total_steps_,
              " (build the scheduler with more total_steps)");
  const auto at = static_cast<double>(epoch);
  double start_step = 0;
  for (size_t k = 0; k < phases_.size(); ++k) {
    const Phase& phase = phases_[k];
    // Past the last phase's end (only epoch total_steps) the position stays at the end: torch
    // extrapolates there, which can make a linear schedule's lr negative.
    if (at <= phase.end_step || k + 1 == phases_.size())
      return {&phase, std::min((at - start_step) / (phase.end_step - start_step), 1.0)};
    start_step = phase.end_step;
  }
  return {&phases_.back(), 1.0};  // not reached: the last phase always matches
}

double OneCycleLR::level(Level level, double max_lr) const {
  const double initial = max_lr / options_.div_factor_;
  switch (level) {
    case Level::Initial: return initial;
    case Level::Max: return max_lr;
    case Level::Min: return initial / options_.final_div_factor_;
  }
  return max_lr;
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy_ == AnnealStrategy::Linear) return (end - start) * pct + start;
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}

double OneCycleLR::lr_at(int64_t epoch, double max_lr) const {
  const Position p = position(epoch);
  return anneal(level(p.phase->start_lr, max_lr), level(p.phase->end_lr, max_lr), p.pct);
}

double OneCycleLR::momentum_at(int64_t epoch) const {
  const Position p = position(epoch);
  return anneal(p.phase->start_momentum, p.phase->end_momentum, p.pct);
}

void OneCycleLR::apply_extras(int64_t epoch) {
  if (momentum_name_.empty()) return;
  const double momentum = momentum_at(epoch);
  for (size_t g = 0; g < optimizer().num_param_groups(); ++g)
    mutable_optimizer().set_group_hyper_param(g, momentum_name_, momentum);
}

namespace {
// The checks that must pass before the base lrs can be taken from schedulers[0].
std::vector<double> first_base_lrs(const Optimizer& optimizer, const std::vector<std::shared_ptr<LRScheduler>>& parts,
                                   const std::vector<int64_t>& milestones) {
  EMBER_CHECK(!parts.empty(), "[SequentialLR] expects at least one scheduler");
  for (size_t k = 0; k < parts.size(); ++k)
    EMBER_CHECK(parts[k] && &parts[k]->optimizer() == &optimizer, "[SequentialLR] scheduler ", k,
                parts[k] ? " belongs to another optimizer" : " is null");
  EMBER_CHECK(milestones.size() + 1 == parts.size(), "[SequentialLR] expects one milestone fewer than schedulers, got ",
              parts.size(), " schedulers and ", milestones.size(), " milestones");
  for (size_t k = 0; k < milestones.size(); ++k)
    EMBER_CHECK(milestones[k] > (k == 0 ? 0 : milestones[k - 1]), "[SequentialLR] milestones must be positive and "
                "increasing, got ", milestones[k], " at position ", k);
  return parts[0]->base_lrs();
}
}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer, first_base_lrs(optimizer, schedulers, milestones)),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  start();
}

double SequentialLR::lr_at(int64_t epoch, double base_lr) const {
  const auto next = std::upper_bound(milestones_.begin(), milestones_.end(), epoch);
  const auto k = static_cast<size_t>(next - milestones_.begin());
  return schedulers_[k]->lr_at(k == 0 ? epoch : epoch - milestones_[k - 1], base_lr);
}

}  // namespace ember::optim
