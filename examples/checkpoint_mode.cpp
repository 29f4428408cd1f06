#include "examples/checkpoint_mode.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "utils/checkpoint_sequential.h"
#include "utils/planner.h"

namespace ember::examples {

CheckpointMode parse_checkpoint_mode(const std::string& mode, const std::string& program) {
  if (mode == "none" || mode == "blocks" || mode == "sqrt") return {mode};
  EMBER_CHECK(mode.starts_with("budget="), "[", program, "] unknown --checkpoint mode '", mode,
              "' (none, blocks, sqrt or budget=MB)");
  const std::string text = mode.substr(7);
  double mb = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), mb);
  EMBER_CHECK(error != std::errc::result_out_of_range, "[", program, "] --checkpoint ", mode, ": '", text,
              "' is out of range");
  EMBER_CHECK(error == std::errc() && end == text.data() + text.size(), "[", program, "] --checkpoint ", mode, ": '",
              text, "' is not a number of MiB");
  return {"budget", mib_to_bytes(mb, program + " --checkpoint " + mode)};
}

Forward checkpointed_forward(const StackedModel& parts, const CheckpointMode& mode, const Tensor& sample) {
  if (mode.kind == "none") return [&model = parts.model](const Tensor& x) { return model(x); };
  if (mode.kind == "blocks") {
    nn::ModuleList& blocks = parts.blocks;
    utils::checkpoint_modules(blocks, [&blocks](nn::Module& m) {
      for (nn::Module& block : blocks)
        if (&block == &m) return true;
      return false;
    });
    return [&model = parts.model](const Tensor& x) { return model(x); };
  }
  if (mode.kind == "sqrt") {
    const auto segments =
        std::max<int64_t>(1, std::lround(std::sqrt(static_cast<double>(parts.blocks.size()))));
    return [parts, segments](const Tensor& x) {
      return parts.head(utils::checkpoint_sequential(parts.blocks, segments, parts.stem(x)));
    };
  }
  // The stem in eval mode, so that profiling leaves its BatchNorm statistics alone (the profile
  // needs only the blocks' input shape; profile_layers itself has no side effects).
  parts.model.eval();
  Tensor stem_out;
  {
    NoGradGuard no_grad;
    stem_out = parts.stem(sample);
  }
  parts.model.train();
  auto layers = utils::profile_layers(parts.blocks, stem_out);
  // The planner budgets the blocks' activations; the stem's output is kept either way.
  utils::CheckpointPlan plan = utils::plan_checkpoints(layers, mode.budget_bytes);
  std::printf("checkpoint plan for %s: %s (predicted peak %s, recompute %.1f ms per step)\n",
              memory::format_bytes(mode.budget_bytes).c_str(), plan.str().c_str(),
              memory::format_bytes(plan.predicted_peak_bytes).c_str(), plan.recompute_ms);
  return [parts, plan](const Tensor& x) { return parts.head(utils::run_plan(parts.blocks, plan, parts.stem(x))); };
}

}  // namespace ember::examples
