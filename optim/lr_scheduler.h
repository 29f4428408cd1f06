#pragma once
// Note [Learning-rate schedulers]
// A scheduler rewrites the learning rate of every group of one optimizer. Each schedule is a
// closed form lr_at(epoch, base_lr), where base_lr is the group's lr when the scheduler was
// made and epoch counts step() calls. Construction already sets epoch 0's lr (a warm-up starts
// low before the first optimizer step), and step() moves to the next epoch; call it after
// optimizer.step(), as in PyTorch. PyTorch computes most schedules recursively from the previous
// lr; the closed forms give the same values up to rounding and do not drift.
//
// Saving: state_dict() holds what step() changes and the base lrs, "last_epoch" (int64 []) and
// "base_lrs" (float64 [groups]); the schedule's own settings (T_max, gamma, ...) come from the
// constructor, so a resumed run builds its scheduler the same way and then loads the dict, which
// also sets the optimizer's lrs for that epoch again.
//
// A schedule may move another hyper-parameter with the lr (OneCycleLR cycles momentum or beta1):
// it overrides apply_extras(epoch), which runs after the lrs of each epoch are set. Schedules
// driven by a metric rather than by the epoch are not LRSchedulers: ReduceLROnPlateau
// (optim/reduce_lr_on_plateau.h).
//
// Chaining: SequentialLR(opt, {warmup, cosine}, {warmup_steps}) runs `warmup` for epochs
// [0, warmup_steps) and then `cosine` from its own epoch 0, as torch.optim.lr_scheduler.SequentialLR.
// Every part is evaluated with the base lrs of the first one: the later parts were built after
// the first had already lowered the lr, so their own base lrs are not the optimizer's. Only the
// parts' lrs are chained: a OneCycleLR inside a SequentialLR does not cycle momentum.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace ember::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  // The lr of every group set by the latest step() (or by the constructor).
  const std::vector<double>& last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  const Optimizer& optimizer() const { return optimizer_; }

  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

  StateDict state_dict() const;
  // Checks the whole dict before changing anything.
  void load_state_dict(const StateDict& state);

 protected:
  // base_lrs: one per group; by default the groups' lrs now.
  explicit LRScheduler(Optimizer& optimizer);
  LRScheduler(Optimizer& optimizer, std::vector<double> base_lrs);
  // Sets epoch 0's lrs; the last line of every concrete constructor (a base constructor cannot
  // call lr_at, the derived part does not exist yet).
  void start() { apply(0, base_lrs_); }
  // Hyper-parameters other than the lr that the schedule sets for `epoch`; none by default.
  virtual void apply_extras(int64_t epoch) { (void)epoch; }
  Optimizer& mutable_optimizer() { return optimizer_; }

 private:
  // Computes every group's lr for `epoch` from `base_lrs` (lr_at may refuse the epoch), and only
  // then sets them and commits epoch and base lrs.
  void apply(int64_t epoch, std::vector<double> base_lrs);

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t epoch_ = 0;
};

// lr = base_lr * gamma^floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2; past T_max the cosine
// goes on (back up), as PyTorch's.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// lr = base_lr * (start_factor + (1 - start_factor) * min(epoch, warmup_steps) / warmup_steps):
// linear from start_factor * base_lr to base_lr, then constant. torch's LinearLR with
// end_factor = 1 and total_iters = warmup_steps.
class LinearWarmup : public LRScheduler {
 public:
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor = 1.0 / 3.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t warmup_steps_;
  double start_factor_;
};

// lr = base_lr * gamma^(the number of milestones <= epoch); a milestone listed twice counts
// twice, as in PyTorch.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// lr = base_lr * lr_lambda(epoch), one function for every group; it must return a finite factor
// >= 0. (torch also takes one function per group.)
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::function<double(int64_t)> lr_lambda_;
};

enum class AnnealStrategy { Cos, Linear };

// OneCycleLROptions().pct_start(0.3).anneal_strategy(AnnealStrategy::Cos).cycle_momentum(true)
// .base_momentum(0.85).max_momentum(0.95).div_factor(25).final_div_factor(1e4).three_phase(false):
// the defaults of torch.optim.lr_scheduler.OneCycleLR.
struct OneCycleLROptions {
  OneCycleLROptions& pct_start(double v) { pct_start_ = v; return *this; }
  OneCycleLROptions& anneal_strategy(AnnealStrategy v) { anneal_strategy_ = v; return *this; }
  OneCycleLROptions& cycle_momentum(bool v) { cycle_momentum_ = v; return *this; }
  OneCycleLROptions& base_momentum(double v) { base_momentum_ = v; return *this; }
  OneCycleLROptions& max_momentum(double v) { max_momentum_ = v; return *this; }
  OneCycleLROptions& div_factor(double v) { div_factor_ = v; return *this; }
  OneCycleLROptions& final_div_factor(double v) { final_div_factor_ = v; return *this; }
  OneCycleLROptions& three_phase(bool v) { three_phase_ = v; return *this; }

  double pct_start_ = 0.3;
  AnnealStrategy anneal_strategy_ = AnnealStrategy::Cos;
  bool cycle_momentum_ = true;
  double base_momentum_ = 0.85;
  double max_momentum_ = 0.95;
  double div_factor_ = 25.0;
  double final_div_factor_ = 1e4;
  bool three_phase_ = false;
};

// Note [One-cycle schedule]
// The lr rises from initial = max_lr / div_factor to max_lr over the first pct_start of
// total_steps, then falls to min = initial / final_div_factor (three_phase: back down to initial
// over as many steps, then on to min). Each phase anneals with a half cosine or a straight line;
// a phase's position runs from its start step to its end step (pct_start * total_steps - 1, ...,
// total_steps - 1, as torch counts them). Momentum moves the other way, from max_momentum down
// to base_momentum while the lr rises and back while it falls: a high lr with high momentum
// would overshoot. It is the optimizer's "momentum" (SGD, RMSprop) or "beta1" (Adam, AdamW);
// with an optimizer that has neither, cycle_momentum must be off. The base lrs of this scheduler
// are the groups' max lrs. A loop of total_steps iterations that steps the scheduler after each
// ends at epoch total_steps, one past the last phase's end: there the schedule stays at its end
// values (torch extrapolates the last phase, which can turn a linear lr negative; docs/decisions.md).
// Later epochs are refused, as in torch.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options = {});
  // One max lr per parameter group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps, OneCycleLROptions options = {});
  double lr_at(int64_t epoch, double max_lr) const override;
  double momentum_at(int64_t epoch) const;
  // "momentum", "beta1", or empty without cycle_momentum.
  const std::string& momentum_name() const { return momentum_name_; }

 private:
  enum class Level { Initial, Max, Min };
  struct Phase {
    double end_step;
    Level start_lr, end_lr;
    double start_momentum, end_momentum;
  };
  struct Position {
    const Phase* phase;
    double pct;
  };
  Position position(int64_t epoch) const;
  double level(Level level, double max_lr) const;
  double anneal(double start, double end, double pct) const;
  void apply_extras(int64_t epoch) override;

  int64_t total_steps_;
  OneCycleLROptions options_;
  std::vector<Phase> phases_;
  std::string momentum_name_;
};

// schedulers[k] runs from milestones[k - 1] (0 for the first) on, counting its epochs from 0
// there (Note [Learning-rate schedulers]).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace ember::optim
