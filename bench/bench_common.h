#pragma once
// What the benchmark programs share: the flag they all add to Google Benchmark's, --threads N
// (default 1, ember's thread count for OpenMP and OpenBLAS together, taken out of argv before
// benchmark::Initialize) and the way to take such flags, the timed loop, and running what they
// registered.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "core/ops.h"
#include "core/tensor.h"

namespace ember::bench {

// Removes every "--NAME VALUE" / "--NAME=VALUE" from argv; the last VALUE goes to `value`.
// Returns false when the flag is given without a value.
inline bool take_flag(int& argc, char** argv, const std::string& name, std::string& value) {
  const std::string flag = "--" + name, with_value = flag + "=";
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (argv[i] == flag) {
      if (i + 1 >= argc) return false;
      value = argv[++i];
    } else if (std::strncmp(argv[i], with_value.c_str(), with_value.size()) == 0) {
      value = argv[i] + with_value.size();
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return true;
}

// Removes "--threads N" / "--threads=N" from argv; returns N (default 1), or -1 if malformed.
inline int take_threads_flag(int& argc, char** argv) {
  std::string value = "1";
  if (!take_flag(argc, argv, "threads", value)) return -1;
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || *end != '\0' || n < 1 || n > 1024) return -1;
  return static_cast<int>(n);
}

// Applies --threads and records it (and the OpenMP wait policy) in the benchmark's context.
// Returns false, having said why, when the flag is malformed.
inline bool setup_threads(int& argc, char** argv, const char* program) {
  const int threads = take_threads_flag(argc, argv);
  if (threads < 1) {
    std::cerr << program << ": --threads expects a positive integer, e.g. --threads 2\n";
    return false;
  }
  set_num_threads(threads);
  benchmark::AddCustomContext("ember_threads", std::to_string(get_num_threads()));
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  benchmark::AddCustomContext("omp_wait_policy", wait_policy ? wait_policy : "(unset)");
  return true;
}

// Runs step() once per benchmark iteration. The tensor it returns is marked as used, so the
// compiler cannot drop the work; the last one is returned.
template <class Step>
Tensor time_steps(benchmark::State& state, Step step) {
  Tensor out;
  for (auto _ : state) {
    out = step();
    benchmark::DoNotOptimize(out.raw_data());
    benchmark::ClobberMemory();
  }
  return out;
}

// benchmark::Initialize, then every registered case through `reporter` (the console's when
// null). Returns main's exit status.
inline int run_benchmarks(int& argc, char** argv, benchmark::BenchmarkReporter* reporter = nullptr) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks(reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace ember::bench
