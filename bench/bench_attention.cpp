// scaled_dot_product_attention forward + backward at one shape, for bench/compare_attention.py
// (which times PyTorch's F.scaled_dot_product_attention on the same inputs' shapes):
//
//   bench_attention --batch 4 --heads 12 --length 1024 --head-dim 64 [--causal] [--dtype bfloat16]
//                   [--backend fused|math] [--threads N] [--reps R]
//
// Prints one line: the median milliseconds of R timed steps (after one untimed), and the peak
// bytes ember's allocator held above the inputs during a step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/autograd/engine.h"
#include "core/ops.h"

using namespace ember;

namespace {

struct Options {
  int64_t batch = 4, heads = 12, length = 1024, head_dim = 64;
  bool causal = false;
  DType dtype = kFloat32;
  AttentionBackend backend = AttentionBackend::Fused;
  int threads = 1, reps = 5;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "bench_attention: %s\n", why);
  std::exit(2);
}

int64_t positive(const char* flag, const char* value) {
  char* end = nullptr;
  const long long n = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || n < 1) usage((std::string(flag) + " expects a positive integer").c_str());
  return n;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--causal") {
      o.causal = true;
      continue;
    }
    if (i + 1 >= argc) usage((flag + " needs a value").c_str());
    const char* value = argv[++i];
    if (flag == "--batch") o.batch = positive(argv[i - 1], value);
    else if (flag == "--heads") o.heads = positive(argv[i - 1], value);
    else if (flag == "--length") o.length = positive(argv[i - 1], value);
    else if (flag == "--head-dim") o.head_dim = positive(argv[i - 1], value);
    else if (flag == "--threads") o.threads = static_cast<int>(positive(argv[i - 1], value));
    else if (flag == "--reps") o.reps = static_cast<int>(positive(argv[i - 1], value));
    else if (flag == "--dtype") {
      const std::string d = value;
      if (d == "float32") o.dtype = kFloat32;
      else if (d == "bfloat16") o.dtype = kBFloat16;
      else usage("--dtype is float32 or bfloat16");
    } else if (flag == "--backend") {
      const std::string b = value;
      if (b == "fused") o.backend = AttentionBackend::Fused;
      else if (b == "math") o.backend = AttentionBackend::Math;
      else usage("--backend is fused or math");
    } else {
      usage(("unknown flag " + flag).c_str());
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  set_num_threads(o.threads);
  set_attention_backend(o.backend);
  const Shape shape{o.batch, o.heads, o.length, o.head_dim};
  const Tensor q = randn(shape).to(o.dtype).requires_grad_(), k = randn(shape).to(o.dtype).requires_grad_(),
               v = randn(shape).to(o.dtype).requires_grad_(), g = randn(shape).to(o.dtype);
  std::vector<double> ms;
  int64_t peak = 0;
  for (int rep = 0; rep <= o.reps; ++rep) {
    const int64_t base = memory::stats(kCPU).live_bytes;
    memory::reset_peak(kCPU);
    const auto start = std::chrono::steady_clock::now();
    Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, o.causal);
    const std::vector<Tensor> grads = autograd::grad({out}, {q, k, v}, {g});
    const auto stop = std::chrono::steady_clock::now();
    peak = std::max(peak, memory::stats(kCPU).peak_bytes - base);
    if (rep > 0) ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("ms=%.3f peak_bytes=%lld\n", ms[ms.size() / 2], static_cast<long long>(peak));
  return 0;
}
