#pragma once
// Note [Loss scaling]
// A float16 number has 5 exponent bits: nothing below 6e-8 survives, and below 6e-5 it loses
// precision. Gradients are often that small, so a backward computed in float16 (under
// Autocast(..., kFloat16)) flushes many of them to zero. GradScaler multiplies the loss by a
// large factor S before backward, which scales every gradient by S too, up into float16's range;
// before the optimizer sees them, it divides them by S again (in float32, where the parameters
// and their gradients live). When S is too large, some gradient overflows to inf or NaN: that
// step is skipped and S halves. After `growth_interval` steps without an overflow S doubles, so
// the scale settles just below the largest one that does not overflow. A training step:
//     optim::GradScaler scaler;
//     Tensor loss;
//     { Autocast amp(kCPU, kFloat16); loss = loss_fn(model(x), y); }
//     optimizer.zero_grad();
//     scaler.scale(loss).backward();
//     scaler.unscale_(optimizer);                      // optional: to clip the true gradients
//     optim::clip_grad_norm_(model.parameters(), 1.0);
//     scaler.step(optimizer);                          // skipped if a gradient is inf or NaN
//     scaler.update();
// bfloat16 has float32's exponent range and needs no scaling. GradScaler still works with it
// (as PyTorch's does): it is then only the inf/NaN guard, at the cost of the unscale pass.
// The semantics, the defaults (S = 2^16, growth 2, backoff 0.5, interval 2000), the order of the
// calls it refuses and the state_dict are torch.amp.GradScaler's; test_grad_scaler compares a
// run with injected infs against PyTorch 2.15's.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace ember::optim {

struct GradScalerOptions {
  double init_scale_ = 65536.0;
  double growth_factor_ = 2.0;   // > 1
  double backoff_factor_ = 0.5;  // in (0, 1)
  int64_t growth_interval_ = 2000;
  bool enabled_ = true;  // off: scale() returns its argument, step() steps, update() does nothing

  GradScalerOptions& init_scale(double v) { init_scale_ = v; return *this; }
  GradScalerOptions& growth_factor(double v) { growth_factor_ = v; return *this; }
  GradScalerOptions& backoff_factor(double v) { backoff_factor_ = v; return *this; }
  GradScalerOptions& growth_interval(int64_t v) { growth_interval_ = v; return *this; }
  GradScalerOptions& enabled(bool v) { enabled_ = v; return *this; }
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * S, in outputs' dtype (S multiplies as a number, so it is exact in float32 before
  // the product rounds). The first call sets S to init_scale.
  Tensor scale(const Tensor& outputs);

  // Divides the gradients of the optimizer's parameters by S in one fused pass per device and
  // records whether any is inf or NaN (Note [Unscaling gradients in one pass]). At most once per
  // optimizer between two update()s, and not after step(). float16 gradients are refused, as
  // PyTorch refuses them: unscaled in float16 they underflow again; keep the parameters in
  // float32 and compute in float16 under autocast.
  void unscale_(Optimizer& optimizer);

  // unscale_ (unless it was called since the last update), then optimizer.step() unless a
  // gradient was inf or NaN. Returns whether the optimizer stepped. Once per optimizer between
  // two update()s.
  bool step(Optimizer& optimizer);

  // After the steps of an iteration: S backs off if any step found an inf or NaN, grows after
  // growth_interval clean iterations in a row, and every optimizer may be unscaled and stepped
  // again. update(new_scale) sets S instead.
  void update();
  void update(double new_scale);

  bool is_enabled() const { return options_.enabled_; }
  // S (init_scale before the first scale()); 1 when disabled.
  double get_scale() const;
  // The clean iterations since S last changed.
  int64_t growth_tracker() const { return growth_tracker_; }
  const GradScalerOptions& options() const { return options_; }

  // {"scale", "growth_factor", "backoff_factor": float64, "growth_interval", "_growth_tracker":
  // int64}, all 0-d, as torch.amp.GradScaler.state_dict(); empty when disabled.
  StateDict state_dict() const;
  // Checks the whole dict (every key present, none unknown, valid values) before it changes
  // anything. An empty dict is refused: it was saved by a disabled scaler.
  void load_state_dict(const StateDict& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerRecord {
    Stage stage = Stage::Ready;
    std::vector<Tensor> found_inf;  // one float32 [1] per device with gradients: 1 where one was inf or NaN
  };

  float current_scale(const char* call) const;  // S; an error naming `call` before the first scale()

  GradScalerOptions options_;
  std::optional<float> scale_;  // S, float32 as PyTorch keeps it; unset until scale() or load_state_dict
  int64_t growth_tracker_ = 0;
  std::map<const Optimizer*, OptimizerRecord> records_;  // the optimizers seen since the last update()
};

}  // namespace ember::optim
