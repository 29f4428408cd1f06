// bench_gpu: one training step of the example programs' MLP and ResNet20 at batch 128 and GPT at
// batch 16 on a CUDA device (the cases of bench/train_cases.h, named as bench_train names them). bench/compare_gpu.py
// times the same steps in PyTorch on the same GPU and reads this program's output:
//
//   bench_gpu [--tf32] [--amp bf16|fp16] [--device cuda:N] [--repetitions R] [--min-time S]
//             [--warmup W] [--only MODEL] [--profile-step]
//
// One JSON object per line on stdout, one per case:
//   {"case": "train_step/mlp/128", "device": "cuda:0", "tf32": false, "amp": "none", "median_ms": ...,
//    "min_ms": ..., "steps_per_block": K, "repetitions": R, "images_per_s": ..., "final_loss": ...}
// or {"case": ..., "error": "..."} when the case failed (then the exit status is 1).
//
// Method (as bench/compare_torch.py's): W warm-up steps (module loading, cuBLAS handles and the
// caching allocator's first allocations stay out of the numbers), then R blocks of K steps each,
// K chosen so that a block lasts about S seconds; each block ends with a synchronisation of the
// device's stream, and a step's time is the block's wall-clock time over K. The median over the
// blocks is reported. The host's time to queue the work counts, as it does for PyTorch eager.
//
// --tf32 lets cuBLAS use TF32 tensor cores for float32 matrix products (CUBLAS_TF32_TENSOR_OP_MATH
// on ember's handle): ember's convolutions are matrix products too, so this is what PyTorch's
// allow_tf32 for matmul and cuDNN means. Without it, cuBLAS's default math: IEEE float32.
// --amp bf16|fp16 runs each step's forward and loss under CUDA autocast of that dtype (Note
// [Autocast] in core/autocast.h), as the examples' --amp and torch.autocast("cuda", dtype) do.
//
// --only MODEL (mlp, resnet20 or gpt) runs that case alone. --profile-step, for a profiler started
// with its collection off (ncu --profile-from-start off), brackets exactly one training step,
// after the check step and the warm-up, with cudaProfilerStart/Stop, and times nothing.
#include <cublas_v2.h>
#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/train_cases.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "examples/training.h"

namespace {

using ember::Tensor;
namespace bench = ember::bench;

struct Options {
  bool tf32 = false;
  std::string amp = "none";
  int device = 0;
  int repetitions = 10;
  double min_time_s = 0.2;
  int warmup = 10;
  std::string only;  // empty: every case
  bool profile_step = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "bench_gpu: " << why
            << "\nusage: bench_gpu [--tf32] [--amp bf16|fp16] [--device cuda:N] [--repetitions R] [--min-time S]"
               " [--warmup W] [--only MODEL] [--profile-step]\n";
  std::exit(2);
}

double parse_number(const std::string& flag, const char* text, double low) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v) || v < low)
    usage(flag + ": expected a finite number >= " + std::to_string(low) + ", got '" + text + "'");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--tf32" || flag == "--profile-step") {
      (flag == "--tf32" ? o.tf32 : o.profile_step) = true;
      continue;
    }
    if (i + 1 >= argc) usage("unknown flag or missing value: " + flag);
    const char* value = argv[++i];
    if (flag == "--device") {
      const std::string d = value;
      if (d.rfind("cuda:", 0) != 0) usage("--device: expected cuda:N, got '" + d + "'");
      o.device = static_cast<int>(parse_number(flag, d.c_str() + 5, 0));
    } else if (flag == "--repetitions") {
      o.repetitions = static_cast<int>(parse_number(flag, value, 1));
    } else if (flag == "--min-time") {
      o.min_time_s = parse_number(flag, value, 0);
    } else if (flag == "--warmup") {
      o.warmup = static_cast<int>(parse_number(flag, value, 0));
    } else if (flag == "--amp") {
      o.amp = value;
      if (o.amp != "bf16" && o.amp != "fp16" && o.amp != "none")
        usage("--amp: expected bf16, fp16 or none, got '" + o.amp + "'");
    } else if (flag == "--only") {
      o.only = value;
      bool known = false;
      for (const bench::ModelCase& m : bench::kModels) known |= m.name == o.only;
      if (!known) usage("--only: expected mlp, resnet20 or gpt, got '" + o.only + "'");
    } else {
      usage("unknown flag: " + flag);
    }
  }
  return o;
}

// JSON string literal (the texts here are case names and error messages).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Seconds for `steps` training steps, the device's queue drained at the end.
double time_block(bench::Setup& s, int device, int steps, Tensor& last_loss) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) last_loss = s.train_step();
  ember::cuda::synchronize(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Times one case and prints its line; returns whether it ran.
bool run_case(const bench::ModelCase& m, const Options& o) {
  const std::string name = "train_step/" + m.name + "/" + std::to_string(m.batch);
  const ember::Device device(ember::DeviceType::CUDA, o.device);
  std::ostringstream line;
  line << "{\"case\": " << quoted(name) << ", \"device\": \"cuda:" << o.device << "\", \"tf32\": "
       << (o.tf32 ? "true" : "false") << ", \"amp\": " << quoted(o.amp);
  try {
    bench::Setup s(m, device);
    if (o.amp != "none") s.amp = o.amp == "bf16" ? ember::kBFloat16 : ember::kFloat16;
    bench::check_step(name, s);
    Tensor loss;
    time_block(s, o.device, o.warmup, loss);
    if (o.profile_step) {
      CUDA_CHECK(cudaProfilerStart());
      time_block(s, o.device, 1, loss);
      CUDA_CHECK(cudaProfilerStop());
      line << ", \"profiled_steps\": 1, \"final_loss\": " << loss.item() << "}";
      std::cout << line.str() << std::endl;
      return true;
    }
    const double one = time_block(s, o.device, 1, loss);
    const int steps = std::max(1, static_cast<int>(std::ceil(o.min_time_s / std::max(one, 1e-6))));
    std::vector<double> ms;
    for (int r = 0; r < o.repetitions; ++r) ms.push_back(1e3 * time_block(s, o.device, steps, loss) / steps);
    const double median = ember::examples::median(ms);
    line << ", \"median_ms\": " << median << ", \"min_ms\": " << *std::min_element(ms.begin(), ms.end()) << ", \"steps_per_block\": " << steps
         << ", \"repetitions\": " << o.repetitions << ", \"images_per_s\": " << static_cast<double>(m.batch) / (median / 1e3)
         << ", \"final_loss\": " << loss.item() << "}";
  } catch (const std::exception& e) {
    line << ", \"error\": " << quoted(e.what()) << "}";
    std::cout << line.str() << std::endl;
    return false;
  }
  std::cout << line.str() << std::endl;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    ember::cuda::check_device(ember::Device(ember::DeviceType::CUDA, o.device));
    CUBLAS_CHECK(cublasSetMathMode(ember::cuda::cublas_handle(o.device),
                                   o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  } catch (const std::exception& e) {
    std::cerr << "bench_gpu: " << e.what() << "\n";
    return 1;
  }
  bool failed = false;
  for (const bench::ModelCase& m : bench::kModels)
    if (o.only.empty() || o.only == m.name) failed |= !run_case(m, o);
  return failed ? 1 : 0;
}
