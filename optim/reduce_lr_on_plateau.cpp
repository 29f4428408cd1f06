#include "optim/reduce_lr_on_plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::optim {

namespace {
std::vector<double> min_lrs_for(const Optimizer& optimizer, const std::vector<double>& given) {
  const size_t groups = optimizer.num_param_groups();
  EMBER_CHECK(given.size() == 1 || given.size() == groups, "[ReduceLROnPlateau] expected one min_lr or ", groups,
              " (one per parameter group), got ", given.size());
  for (double lr : given)
    EMBER_CHECK(std::isfinite(lr) && lr >= 0.0, "[ReduceLROnPlateau] min_lr must be finite and >= 0, got ", lr);
  return given.size() == groups ? given : std::vector<double>(groups, given[0]);
}

double worst(PlateauMode mode) {
  check_enum(mode, PlateauMode::Max, "ReduceLROnPlateau", "mode");
  const double inf = std::numeric_limits<double>::infinity();
  return mode == PlateauMode::Min ? inf : -inf;
}
}  // namespace

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(optimizer),
      options_(std::move(options)),
      min_lrs_(min_lrs_for(optimizer, options_.min_lrs_)),
      best_(worst(options_.mode_)) {
  const ReduceLROnPlateauOptions& o = options_;
  check_enum(o.threshold_mode_, ThresholdMode::Abs, "ReduceLROnPlateau", "threshold_mode");
  EMBER_CHECK(o.factor_ >= 0.0 && o.factor_ < 1.0, "[ReduceLROnPlateau] factor must be in [0, 1), got ", o.factor_);
  EMBER_CHECK(o.patience_ >= 0, "[ReduceLROnPlateau] patience must be >= 0, got ", o.patience_);
  EMBER_CHECK(o.cooldown_ >= 0, "[ReduceLROnPlateau] cooldown must be >= 0, got ", o.cooldown_);
  EMBER_CHECK(std::isfinite(o.threshold_) && o.threshold_ >= 0.0,
              "[ReduceLROnPlateau] threshold must be finite and >= 0, got ", o.threshold_);
  EMBER_CHECK(std::isfinite(o.eps_) && o.eps_ >= 0.0, "[ReduceLROnPlateau] eps must be finite and >= 0, got ", o.eps_);
  read_lrs();
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const double t = options_.threshold_;
  const bool rel = options_.threshold_mode_ == ThresholdMode::Rel;
  if (options_.mode_ == PlateauMode::Min) return metric < (rel ? best_ * (1.0 - t) : best_ - t);
  return metric > (rel ? best_ * (1.0 + t) : best_ + t);
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > options_.patience_) {
    reduce_lrs();
    cooldown_counter_ = options_.cooldown_;
    num_bad_epochs_ = 0;
  }
  read_lrs();
}

void ReduceLROnPlateau::reduce_lrs() {
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) {
    const double old_lr = optimizer_.group_lr(g);
    const double new_lr = std::max(old_lr * options_.factor_, min_lrs_[g]);
    if (old_lr - new_lr > options_.eps_) optimizer_.set_group_lr(g, new_lr);
  }
}

void ReduceLROnPlateau::read_lrs() {
  last_lr_.clear();
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) last_lr_.push_back(optimizer_.group_lr(g));
}

StateDict ReduceLROnPlateau::state_dict() const {
  const auto count = [](int64_t v) { return scalar_tensor(static_cast<double>(v), kInt64); };
  return {{"last_epoch", count(last_epoch_)},
          {"best", scalar_tensor(best_, kFloat64)},
          {"num_bad_epochs", count(num_bad_epochs_)},
          {"cooldown_counter", count(cooldown_counter_)}};
}

void ReduceLROnPlateau::load_state_dict(const StateDict& state) {
  const char* keys[] = {"last_epoch", "best", "num_bad_epochs", "cooldown_counter"};
  for (const auto& entry : state) {
    const std::string& key = entry.first;  // a plain name: clang 14 cannot capture a structured binding
    EMBER_CHECK(std::find_if(std::begin(keys), std::end(keys), [&](const char* k) { return key == k; }) !=
                    std::end(keys),
                "[ReduceLROnPlateau] load_state_dict: unexpected key '", key,
                "' (expected last_epoch, best, num_bad_epochs and cooldown_counter)");
  }
  const auto find = [&](const char* key, DType dtype) -> const Tensor& {
    const auto it = state.find(key);
    EMBER_CHECK(it != state.end() && it->second.defined(), "[ReduceLROnPlateau] load_state_dict: missing key '", key,
                "'");
    EMBER_CHECK(it->second.dim() == 0 && it->second.dtype() == dtype, "[ReduceLROnPlateau] load_state_dict: '", key,
                "' must be a 0-d ", dtype, " tensor, got shape ", shape_str(it->second.shape()), " and dtype ",
                it->second.dtype());
    return it->second;
  };
  const auto counter = [&](const char* key) {
    const int64_t v = find(key, kInt64).item<int64_t>();
    EMBER_CHECK(v >= 0, "[ReduceLROnPlateau] load_state_dict: '", key, "' must not be negative, got ", v);
    return v;
  };
  const int64_t last_epoch = counter("last_epoch"), bad = counter("num_bad_epochs"), cool = counter("cooldown_counter");
  const double best = find("best", kFloat64).item();
  last_epoch_ = last_epoch;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cool;
  best_ = best;
  read_lrs();
}

}  // namespace ember::optim
