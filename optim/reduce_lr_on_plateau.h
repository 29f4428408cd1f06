#pragma once
// Note [Reducing the lr on a plateau]
// ReduceLROnPlateau watches a metric (a validation loss, an accuracy) instead of counting epochs:
// step(metric) once per epoch. A metric better than the best so far by more than the threshold
// (relative: best * (1 -+ threshold); absolute: best -+ threshold) becomes the new best; any
// other is a bad epoch. After more than `patience` bad epochs in a row every group's lr is
// multiplied by factor (not below its min_lr; a change smaller than eps is skipped), and the
// next `cooldown` epochs count no bad epochs. A NaN metric is never better, so it counts as bad,
// as in torch.optim.lr_scheduler.ReduceLROnPlateau. The lrs live in the optimizer (and in its
// state_dict); this scheduler's state_dict holds its counters: last_epoch, num_bad_epochs and
// cooldown_counter (int64 []) and best (float64 []). Its settings come from the constructor, as
// for the other schedulers (Note [Learning-rate schedulers]).
#include <cstdint>
#include <vector>

#include "optim/optimizer.h"

namespace ember::optim {

enum class PlateauMode { Min, Max };     // lower or higher metrics are better
enum class ThresholdMode { Rel, Abs };

// ReduceLROnPlateauOptions().mode(PlateauMode::Min).factor(0.1).patience(10).threshold(1e-4)
// .threshold_mode(ThresholdMode::Rel).cooldown(0).min_lr(0).eps(1e-8): torch's defaults.
struct ReduceLROnPlateauOptions {
  ReduceLROnPlateauOptions& mode(PlateauMode v) { mode_ = v; return *this; }
  ReduceLROnPlateauOptions& factor(double v) { factor_ = v; return *this; }
  ReduceLROnPlateauOptions& patience(int64_t v) { patience_ = v; return *this; }
  ReduceLROnPlateauOptions& threshold(double v) { threshold_ = v; return *this; }
  ReduceLROnPlateauOptions& threshold_mode(ThresholdMode v) { threshold_mode_ = v; return *this; }
  ReduceLROnPlateauOptions& cooldown(int64_t v) { cooldown_ = v; return *this; }
  ReduceLROnPlateauOptions& min_lr(double v) { min_lrs_ = {v}; return *this; }  // every group
  ReduceLROnPlateauOptions& min_lrs(std::vector<double> v) { min_lrs_ = std::move(v); return *this; }  // per group
  ReduceLROnPlateauOptions& eps(double v) { eps_ = v; return *this; }

  PlateauMode mode_ = PlateauMode::Min;
  double factor_ = 0.1;
  int64_t patience_ = 10;
  double threshold_ = 1e-4;
  ThresholdMode threshold_mode_ = ThresholdMode::Rel;
  int64_t cooldown_ = 0;
  std::vector<double> min_lrs_ = {0.0};
  double eps_ = 1e-8;
};

class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;

  void step(double metric);
  // Every group's lr after the latest step() (or when built).
  const std::vector<double>& last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }

  StateDict state_dict() const;
  // Checks the whole dict before changing anything.
  void load_state_dict(const StateDict& state);

 private:
  bool is_better(double metric) const;
  void reduce_lrs();
  void read_lrs();

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;  // one per group
  std::vector<double> last_lr_;
  int64_t last_epoch_ = 0;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
};

}  // namespace ember::optim
