// Note [Budgeting a training step]
// budget=MB bounds one training step as fit runs it: forward, the cross-entropy (target_loss) and
// backward, from gradients set to none, in bytes above what was live before it (the parameters,
// the optimizer's state, the batch). The planner bounds only what the blocks add above their input
// (Note [Checkpoint planning]); the rest of the step is the outside part X: the stem's saved
// tensors and output, the head's activations, the logits (until backward: fit lets them go
// before it, keeping what the loss saved), the loss's tensors, the head's and the stem's
// parameter gradients. The blocks are planned
// (utils::plan_selective: the segments, and the outputs each checkpointed one keeps, whose bytes
// its prediction counts: Note [Planning per-op saves]) with
//     budget - O,   O = P - B_last,
// where P is the measured peak of one plain step of the whole model on the sample batch (targets
// of class 0: the loss's bytes depend on shapes only) and B_last is the blocks' profile's peak
// while backward was in the last block. Why O bounds X where it matters:
//  * In the blocks. X grows from the blocks' forward (the stem's part) until backward reaches the
//    last block (the head's and the loss's part added) and does not grow while backward runs
//    through the blocks. At that moment the plain step held X + B_last (the same ops on the same
//    shapes as the profile), so P >= X + B_last, i.e. X <= O. The planned step holds X plus what
//    its blocks hold, at most O + the plan's prediction <= budget.
//  * In the head and the loss. The plain step held X + L (the blocks' activations) <= P, the plan
//    X + K, what its segments keep. The plan's prediction is at least K + B_last - L (the last
//    segment's backward holds the last block's working set on top of what is kept), so
//    X + K <= P - L + K <= O + the prediction.
//  * In the stem's backward. What the blocks' backward left (their parameter gradients and their
//    input's gradient) is within block 0's backward peak, which the prediction contains; the
//    stem adds its own gradients, small next to X (embedding tables, a convolution's weights).
// The smallest budget a step fits is O + utils::min_feasible_budget(blocks). Every number is a
// byte count, so a model and batch always get the same plan. The tests measure the bound on the
// GPT, ResNet20 and a BERT classifier (tests/test_checkpoint_budget.cpp).
#include "examples/checkpoint_mode.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/out_of_memory.h"
#include "utils/checkpoint_sequential.h"
#include "utils/limit_plan.h"
#include "utils/op_planner.h"
#include "utils/planner.h"
#include "utils/untraced_step.h"

namespace ember::examples {

CheckpointMode parse_checkpoint_mode(const std::string& mode, const std::string& program) {
  if (mode == "none" || mode == "blocks" || mode == "sqrt" || mode == "auto") return {mode};
  EMBER_CHECK(mode.starts_with("budget="), "[", program, "] unknown --checkpoint mode '", mode,
              "' (none, blocks, sqrt, budget=MB or auto)");
  const std::string text = mode.substr(7);
  double mb = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), mb);
  EMBER_CHECK(error != std::errc::result_out_of_range, "[", program, "] --checkpoint ", mode, ": '", text,
              "' is out of range");
  EMBER_CHECK(error == std::errc() && end == text.data() + text.size(), "[", program, "] --checkpoint ", mode, ": '",
              text, "' is not a number of MiB");
  return {"budget", mib_to_bytes(mb, program + " --checkpoint " + mode)};
}

namespace {

// P of the Note: one plain training step of the whole model, forward, loss and backward.
int64_t plain_step_peak(nn::Module& model, const Tensor& sample) {
  std::vector<Tensor> leaves = model.parameters();
  leaves.push_back(sample);
  const utils::UntracedStep no_trace(leaves);
  const Device device = sample.device();
  const int64_t base = memory::stats(device).live_bytes;
  memory::reset_peak(device);
  Tensor logits = model(sample);
  Shape targets = logits.shape();
  targets.pop_back();
  Tensor loss = target_loss(logits, zeros(targets, TensorOptions(kInt64).with_device(device)));
  logits = Tensor();  // fit lets them go before backward
  loss.backward();
  return memory::stats(device).peak_bytes - base;
}

// The blocks' input for their profile: the stem's output on the sample, computed in eval mode so
// that BatchNorm statistics and Dropout generators are left alone (the profile needs its shape),
// and a leaf that requires grad when the stem's output does, so that the profiled backward makes
// the input's gradient as a training step does.
Tensor blocks_input(const StackedModel& parts, const Tensor& sample) {
  parts.model.eval();
  Tensor stem_out;
  {
    EnableGradGuard grad_on;
    stem_out = parts.stem(sample);
  }
  parts.model.train();
  Tensor input = stem_out.detach();
  if (stem_out.requires_grad()) input.requires_grad_();
  return input;
}

}  // namespace

int64_t StepBudget::smallest() const { return outside + utils::min_feasible_budget(blocks); }

StepBudget profile_step_budget(const StackedModel& parts, const Tensor& sample) {
  StepBudget b;
  b.plain_step_peak = plain_step_peak(parts.model, sample);
  b.blocks = utils::profile_layers(parts.block_chain(), blocks_input(parts, sample));
  b.outside = std::max<int64_t>(0, b.plain_step_peak - b.blocks.back().backward_peak);
  return b;
}

int64_t bytes_to_come(const optim::Optimizer& optimizer, const data::DataLoader& loader, int64_t batch_bytes,
                      Device device) {
  const int64_t ahead = device == kCPU ? loader.batches_ahead() : 0;
  const int64_t state_made = memory::live_by_category(device)[MemoryCategory::OptimizerState];  // a resumed run's
  return std::max<int64_t>(0, optimizer.full_state_bytes(device) - state_made) + (ahead + 1) * batch_bytes;
}

namespace {

Forward plain_forward(const StackedModel& parts) {
  return [&model = parts.model](const Tensor& x) { return model(x); };
}

// budget=MB's forward for a measured step: the blocks planned for what the outside leaves.
Forward planned_forward(const StackedModel& parts, const StepBudget& step, int64_t budget_bytes, const Tensor& sample,
                        const utils::CheckpointOptions& options) {
  const utils::LayerChain chain = parts.block_chain();
  utils::SelectivePlan plan;
  utils::with_limit_lifted(sample.device(), [&] {
    plan = utils::plan_selective(chain, step.blocks, blocks_input(parts, sample), budget_bytes - step.outside);
  });
  int64_t blocks_flops = 0;
  for (const utils::LayerProfile& block : step.blocks) blocks_flops += block.forward_flops;
  std::printf("checkpoint plan for %s: %s (predicted step peak %s: %s for the stem, the head and the loss, %s for "
              "the blocks; a plain step %s; recomputes %.1f%% of the blocks' forward work)\n",
              memory::format_bytes(budget_bytes).c_str(), plan.str().c_str(),
              memory::format_bytes(step.outside + plan.predicted_peak_bytes).c_str(),
              memory::format_bytes(step.outside).c_str(), memory::format_bytes(plan.predicted_peak_bytes).c_str(),
              memory::format_bytes(step.plain_step_peak).c_str(),
              100.0 * static_cast<double>(plan.recompute_flops) /
                  static_cast<double>(std::max<int64_t>(blocks_flops, 1)));
  return [parts, chain, plan, options](const Tensor& x) {
    return parts.head(utils::run_plan(chain, plan, parts.stem(x), options));
  };
}

StepBudget measured_step(const StackedModel& parts, const Tensor& sample) {
  StepBudget step;
  utils::with_limit_lifted(sample.device(), [&] { step = profile_step_budget(parts, sample); });
  return step;
}

// Bytes in MiB with two decimals, rounded up or down.
std::string mib(int64_t bytes, bool up) {
  const double hundredths = static_cast<double>(bytes) * 100 / (1 << 20);
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", (up ? std::ceil(hundredths) : std::floor(hundredths)) / 100);
  return text;
}

// Note [Advice under a limit]
// Under a memory limit, a program that runs a mode other than auto may not fit; when it does not,
// its OutOfMemoryError should say what would (memory::set_out_of_memory_advice). The step is
// measured as auto measures it, and the advice is auto's choice: the --checkpoint that fits, or,
// when none fits this batch, the largest batch whose smallest budget fits what the limit leaves
// (found by halving the sample until one fits, then bisecting up to the one below the batch that
// did not; the bytes held whatever the step checkpoints are taken as this batch's, which a smaller
// batch only lowers).
std::string limit_advice(const StackedModel& parts, const StepBudget& step, const utils::LimitBudget& under,
                         const Tensor& sample) {
  const int64_t budget = under.step_budget();
  if (budget >= step.plain_step_peak) return "";
  const std::string smallest_limit = memory::format_bytes(under.limit_for(step.smallest()));
  if (budget >= step.smallest())
    return detail::concat(
        "advice: checkpointing fits this training step under the limit: --checkpoint auto plans for the ",
        memory::format_bytes(budget), " it leaves a step, and any --checkpoint budget=MB from ",
        mib(step.smallest(), /*up=*/true), " to ", mib(budget, /*up=*/false), " fits (a plain step needs ",
        memory::format_bytes(step.plain_step_peak), ")");
  const int64_t batch = sample.size(0);
  const auto fits = [&](int64_t b) { return measured_step(parts, sample.narrow(0, 0, b)).smallest() <= budget; };
  int64_t good = batch / 2;
  while (good > 0 && !fits(good)) good /= 2;
  if (good == 0)
    return detail::concat("advice: no checkpointing fits even a batch of 1 under the limit; the smallest limit for ",
                          "this batch of ", batch, " is ", smallest_limit);
  for (int64_t bad = std::min(2 * good, batch); bad - good > 1;) {
    const int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return detail::concat("advice: no checkpointing fits a batch of ", batch, " under the limit (the smallest limit ",
                        "that would is ", smallest_limit, "); --checkpoint auto fits a batch of ", good,
                        " (--batch-size ", good, ")");
}

// auto (Note [Planning for a memory limit] in utils/limit_plan.cpp).
Forward auto_forward(const StackedModel& parts, const CheckpointMode& mode, const Tensor& sample,
                     const utils::CheckpointOptions& options) {
  const Device device = sample.device();
  const std::optional<utils::LimitBudget> under = utils::budget_under_limit(device, mode.to_come);
  if (!under) {
    std::printf("checkpoint auto: no memory limit on %s, so nothing is checkpointed\n", device.str().c_str());
    return plain_forward(parts);
  }
  const StepBudget step = measured_step(parts, sample);
  const int64_t budget = under->step_budget();
  std::printf("checkpoint auto: the limit of %s on %s leaves a training step %s (%s held whatever it checkpoints, "
              "%s headroom for the allocator's blocks); a plain step needs %s\n",
              memory::format_bytes(under->limit).c_str(), device.str().c_str(),
              memory::format_bytes(std::max<int64_t>(budget, 0)).c_str(), memory::format_bytes(under->held).c_str(),
              memory::format_bytes(under->headroom).c_str(), memory::format_bytes(step.plain_step_peak).c_str());
  if (budget >= step.plain_step_peak) {
    std::printf("checkpoint auto: a plain step fits, so nothing is checkpointed\n");
    return plain_forward(parts);
  }
  if (budget < step.smallest()) {
    const std::string advice = limit_advice(parts, step, *under, sample);
    EMBER_FAIL("[checkpoint auto] no checkpointing fits a training step ", under->shortfall(device, step.smallest()),
               advice.empty() ? "" : "\n  " + advice);
  }
  return planned_forward(parts, step, budget, sample, options);
}

}  // namespace

Forward checkpointed_forward(const StackedModel& parts, const CheckpointMode& mode, const Tensor& sample,
                             const utils::CheckpointOptions& options) {
  const Device device = sample.device();
  if (mode.kind == "auto") return auto_forward(parts, mode, sample, options);
  std::optional<StepBudget> step;
  if (const std::optional<utils::LimitBudget> under = utils::budget_under_limit(device, mode.to_come)) {
    step = measured_step(parts, sample);
    memory::set_out_of_memory_advice(device, limit_advice(parts, *step, *under, sample));
  }
  if (mode.kind == "none") return plain_forward(parts);
  if (mode.kind == "blocks") {
    // Note [The last block stays plain]
    // Backward starts in the last block right after the forward left it, so checkpointing it
    // would recompute activations that the step is about to need anyway: the same peak (that
    // block's activations are alive in its backward either way), one block's forward more time.
    // PyTorch's checkpoint_sequential leaves its last segment plain for the same reason.
    nn::ModuleList& blocks = parts.blocks;
    const nn::Module* last = blocks.size() > 0 ? &blocks[blocks.size() - 1] : nullptr;
    utils::checkpoint_modules(
        blocks,
        [&blocks, last](nn::Module& m) {
          if (&m == last) return false;
          for (nn::Module& block : blocks)
            if (&block == &m) return true;
          return false;
        },
        options);
    return plain_forward(parts);
  }
  if (mode.kind == "sqrt") {
    const auto segments =
        std::max<int64_t>(1, std::lround(std::sqrt(static_cast<double>(parts.blocks.size()))));
    return [parts, chain = parts.block_chain(), segments, options](const Tensor& x) {
      return parts.head(utils::checkpoint_sequential(chain, segments, parts.stem(x), options));
    };
  }
  if (!step) step = measured_step(parts, sample);
  const int64_t smallest = step->smallest();
  EMBER_CHECK(mode.budget_bytes >= smallest, "[checkpoint budget] no plan fits a training step into ",
              memory::format_bytes(mode.budget_bytes), " (", mode.budget_bytes,
              " bytes); the smallest feasible budget for this model and batch is ", memory::format_bytes(smallest),
              " (", smallest, " bytes): ", memory::format_bytes(step->outside),
              " for the stem, the head and the loss, ", memory::format_bytes(smallest - step->outside),
              " for the blocks (a plain step takes ", memory::format_bytes(step->plain_step_peak), ")");
  return planned_forward(parts, *step, mode.budget_bytes, sample, options);
}

}  // namespace ember::examples
