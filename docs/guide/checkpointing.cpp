// Activation checkpointing: keep less for backward, recompute it when backward needs it.
#include <ember/ember.h>

#include <cstdio>

using namespace ember;

// The peak bytes a training step adds to what was alive before it (ember's allocator counts
// every byte, on the CPU too).
template <class Forward>
int64_t step_peak(nn::Module& model, const Tensor& x, Forward forward) {
  model.zero_grad();
  const int64_t before = memory::stats(Device("cpu")).live_bytes;
  memory::reset_peak(Device("cpu"));
  sum(forward(x)).backward();
  return memory::stats(Device("cpu")).peak_bytes - before;
}

int main() {
  manual_seed(0);
  nn::Sequential layers;
  for (int i = 0; i < 16; ++i) {
    layers.add<nn::Linear>(256, 256);
    layers.add<nn::GELU>();
  }
  Tensor x = randn({512, 256});

  const int64_t plain = step_peak(layers, x, [&](const Tensor& in) { return layers(in); });
  Tensor plain_grad = layers.at<nn::Linear>(0).weight.grad().clone();

  // round(sqrt(32)) = 6 segments: each keeps only its input, and backward recomputes the rest.
  const int64_t segmented = step_peak(layers, x, [&](const Tensor& in) {
    return utils::checkpoint_sequential(layers, 6, in);
  });
  // The whole stack as one checkpoint, with a policy that keeps the matmuls' outputs. Here that
  // holds what a plain step holds, no less: each GELU's input is a matmul's output, which plain
  // keeps too, and backward brings every GELU's output back at once (docs/checkpointing.md,
  // section 6: when a policy pays).
  utils::CheckpointOptions keep_matmuls;
  keep_matmuls.policy = utils::save_matmuls();
  const int64_t whole = step_peak(layers, x, [&](const Tensor& in) {
    return utils::checkpoint(layers, in, keep_matmuls);
  });

  std::printf("peak above the parameters: plain %s, 6 segments %s, one checkpoint keeping matmuls %s\n",
              memory::format_bytes(plain).c_str(), memory::format_bytes(segmented).c_str(),
              memory::format_bytes(whole).c_str());
  // The recompute replays the forward exactly, so the gradients are the same bits.
  EMBER_CHECK(max(abs(layers.at<nn::Linear>(0).weight.grad() - plain_grad)).item() == 0.0,
              "checkpointing changed a gradient");
  EMBER_CHECK(segmented < plain, "6 segments should keep less than a plain step");
  return 0;
}
