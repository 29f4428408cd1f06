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
// Chaining: SequentialLR(opt, {warmup, cosine}, {warmup_steps}) runs `warmup` for epochs
// [0, warmup_steps) and then `cosine` from its own epoch 0, as torch.optim.lr_scheduler.SequentialLR.
// Every part is evaluated with the base lrs of the first one: the later parts were built after
// the first had already lowered the lr, so their own base lrs are not the optimizer's.
#include <cstdint>
#include <memory>
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
  void start() { apply(); }

 private:
  void apply();

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
