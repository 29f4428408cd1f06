// What waking the OpenMP team costs against what it saves, the measurement behind
// Note [The parallel grain] in core/cpu/parallel.h: an affine pass y = 2x + 1 over n floats on the
// calling thread and over the team, after a pause in which the team's threads fall asleep as
// they do between a training step's ops (run it with OMP_WAIT_POLICY=PASSIVE, as the examples
// run). Prints, per n, the best and the median time of each over the runs.
//
//   OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 build/release/bench/bench_parallel_grain [runs]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Microseconds of one pass over n elements, on the team when `team`, else on this thread.
double timed_pass(const std::vector<float>& x, std::vector<float>& y, int64_t n, bool team) {
  std::this_thread::sleep_for(std::chrono::microseconds(200));  // the team goes to sleep
  const Clock::time_point start = Clock::now();
#pragma omp parallel for if (team) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = 2.0f * x[static_cast<size_t>(i)] + 1.0f;
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  const int64_t largest = int64_t{1} << 20;
  std::vector<float> x(static_cast<size_t>(largest), 1.0f), y(static_cast<size_t>(largest));
  std::printf("threads %d, %d runs each; microseconds per pass, best / median\n", omp_get_max_threads(), runs);
  std::printf("%8s  %20s  %20s\n", "floats", "calling thread", "thread team");
  for (int64_t n = int64_t{1} << 15; n <= largest; n *= 2) {
    std::vector<double> alone, team;
    for (int r = 0; r < runs; ++r) {  // interleaved, so a change of load falls on both
      alone.push_back(timed_pass(x, y, n, false));
      team.push_back(timed_pass(x, y, n, true));
    }
    for (std::vector<double>* times : {&alone, &team}) std::sort(times->begin(), times->end());
    const auto median = [](const std::vector<double>& t) { return t[t.size() / 2]; };
    std::printf("%8lld  %9.1f / %8.1f  %9.1f / %8.1f\n", static_cast<long long>(n), alone.front(), median(alone),
                team.front(), median(team));
  }
  return 0;
}
