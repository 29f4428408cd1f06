// amp_accuracy: one training step's loss and gradients of the example models (bench/train_cases.h)
// in float32 and under bfloat16 autocast on the CPU, written for bench/compare_amp_accuracy.py,
// which computes the same two in PyTorch from the same weights and batch and compares how far
// each framework's bfloat16 result lies from its own float32 one.
//
//   amp_accuracy OUT_DIR [SEEDS]   writes OUT_DIR/<model>_<seed>.safetensors for mlp, resnet20
//                                  and gpt, for the seeds 0 .. SEEDS-1 (default 1)
//
// A distance from one step is one draw of many rounding errors, and a loss's can nearly cancel
// by chance, so the comparison takes several seeds. Each file holds
//   model.<key>         the model's state_dict at initialisation (with the seed; 0 is bench_train's)
//   x, y                the batch (drawn after the model, as bench_train's)
//   fp32.loss           the step's loss in float32
//   fp32.grad.<name>    every parameter's gradient
//   bf16.loss, bf16.grad.<name>   the same with the forward and the loss under
//                       Autocast(DeviceType::CPU, kBFloat16), the backward outside it
// The MLP and the GPT run in evaluation mode (their dropout would draw different masks in the two
// frameworks); the ResNet in training mode (batch statistics; it has no dropout).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "bench/train_cases.h"
#include "serialize/safetensors.h"

namespace {

using namespace ember;

void add_step(bench::Setup& s, std::optional<DType> amp, const std::string& prefix, nn::StateDict& out) {
  s.model->zero_grad();
  s.amp = amp;
  const Tensor loss = s.loss();
  loss.backward();
  out[prefix + "loss"] = loss.detach().to(kFloat32);
  for (const auto& [name, p] : s.model->named_parameters()) out[prefix + "grad." + name] = p.grad().clone();
}

// Writes DIR/<model>_<seed>.safetensors (see the top of the file).
void write_case(const bench::ModelCase& m, int seed, const std::string& dir) {
  bench::Setup s(m, kCPU, true, static_cast<uint64_t>(seed));
  if (m.name != "resnet20") s.model->eval();
  nn::StateDict out;
  for (const auto& [key, value] : s.model->state_dict()) out["model." + key] = value.clone();
  out["x"] = s.x;
  out["y"] = s.y;
  add_step(s, std::nullopt, "fp32.", out);
  add_step(s, kBFloat16, "bf16.", out);
  const std::string path = dir + "/" + m.name + "_" + std::to_string(seed) + ".safetensors";
  nn::save_safetensors(out, path, {{"model", m.name}, {"training", m.name == "resnet20" ? "1" : "0"}});
  std::printf("wrote %s: fp32 loss %.6f, bf16 loss %.6f\n", path.c_str(), out.at("fp32.loss").item(),
              out.at("bf16.loss").item());
}

}  // namespace

int main(int argc, char** argv) {
  const int seeds = argc == 3 ? std::atoi(argv[2]) : 1;
  if (argc < 2 || argc > 3 || seeds < 1) {
    std::fprintf(stderr, "usage: amp_accuracy OUT_DIR [SEEDS]\n");
    return 2;
  }
  try {
    for (int seed = 0; seed < seeds; ++seed)
      for (const bench::ModelCase& m : bench::kModels) write_case(m, seed, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "amp_accuracy: %s\n", e.what());
    return 1;
  }
  return 0;
}
