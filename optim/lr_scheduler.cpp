#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
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
  ++epoch_;
  apply();
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
  base_lrs_ = std::move(base_lrs);
  epoch_ = last_epoch;
  apply();
}

void LRScheduler::apply() {
  last_lr_.clear();
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    last_lr_.push_back(lr_at(epoch_, base_lrs_[g]));
    optimizer_.set_group_lr(g, last_lr_.back());
  }
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
