// One DistributedDataParallel training step of the example MLP (784-512-512-10), timed on every
// rank, for docs/distributed.md and bench/RESULTS.md. Run under the launcher:
//   mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS=1 bench/bench_ddp [--steps N] [--batch B]
//          [--bucket-mib M] [--timeline]
// Rank 0 prints medians over the steps: the step (forward, backward with the reductions, SGD step), the
// backward, the reduction left to wait for once the engine had run its last node ("exposed":
// end of backward -> averaged .grad; and the part of it after the slower rank's backward ended,
// which is what the reduction itself adds once both ranks are done), what the same buckets cost
// with nothing to overlap with ("alone": launched and waited for as DDP does, and as blocking
// allreduces one after another), and "in flight behind backward": of the time the
// buckets' reductions were in flight (launched -> found finished), the fraction that lay before
// the end of backward, i.e. behind backward's own work. A reduction's finish is seen when DDP
// polls it (at the next gradient) or waits for it, and "in flight" includes waiting for the other
// rank to launch the same bucket, so on a loaded machine skew between the ranks counts in too.
// --timeline prints the events of the last step: when each parameter's gradient was ready,
// when each bucket was launched and found finished, relative to the start of backward.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/ops.h"
#include "distributed/distributed.h"
#include "examples/models.h"
#include "optim/sgd.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double, std::milli>(to - from).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Flags {
  int steps = 20;
  int64_t batch = 64;
  double bucket_mib = 25;
  bool timeline = false;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return std::strtod(argv[++i], nullptr);
    };
    if (a == "--steps") f.steps = static_cast<int>(value());
    else if (a == "--batch") f.batch = static_cast<int64_t>(value());
    else if (a == "--bucket-mib") f.bucket_mib = value();
    else if (a == "--timeline") f.timeline = true;
    else throw std::runtime_error("unknown flag " + a);
  }
  if (f.steps < 2 || f.batch < 1 || !(f.bucket_mib > 0)) throw std::runtime_error("bad --steps, --batch or --bucket-mib");
  return f;
}

}  // namespace

int main(int argc, char** argv) try {
  const Flags flags = parse(argc, argv);
  auto group = distributed::init_process_group();
  set_num_threads(1);
  manual_seed(1);
  examples::MLP model(0.0);

  // When each parameter's gradient was complete in the current step (registered before DDP's hooks, so they
  // run first: a bucket is launched after the gradient that completes it is marked here).
  const auto named = model.named_parameters();
  std::vector<Clock::time_point> grad_ready(named.size());
  for (size_t i = 0; i < named.size(); ++i)
    named[i].second.register_hook([&grad_ready, i](const Tensor&) {
      grad_ready[i] = Clock::now();
      return Tensor();
    });
  distributed::DistributedDataParallel ddp(
      model, group, {.bucket_cap_bytes = static_cast<size_t>(flags.bucket_mib * 1024 * 1024)});
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01).momentum(0.9));

  manual_seed(100 + static_cast<uint64_t>(group->rank()));
  const Tensor x = randn({flags.batch, 1, 28, 28});
  const Tensor y = randint(0, 10, {flags.batch});
  std::vector<double> step_ms, backward_ms, exposed_ms, after_slowest_ms, hidden_fraction;
  Clock::time_point backward_start;
  for (int s = 0; s < flags.steps; ++s) {
    group->barrier();  // every rank starts the step together: the numbers are per step, not drift
    const auto start = Clock::now();
    sgd.zero_grad();
    Tensor loss = cross_entropy(ddp(x), y);
    backward_start = Clock::now();
    loss.backward();
    const auto backward_end = Clock::now();
    sgd.step();
    const auto end = Clock::now();
    const distributed::BackwardTimeline& t = ddp.last_timeline();
    // The ranks share the machine's steady clock: when did the slowest rank's backward end?
    const auto since_epoch = [](Clock::time_point p) {
      return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(p.time_since_epoch()).count());
    };
    const Tensor ends = group->allgather(tensor({since_epoch(t.end_of_backward)}, kFloat64));
    if (s == 0) continue;  // warm-up: first allocations
    after_slowest_ms.push_back((since_epoch(t.reduced) - max(ends).item()) / 1e6);
    step_ms.push_back(ms(start, end));
    backward_ms.push_back(ms(backward_start, backward_end));
    exposed_ms.push_back(ms(t.end_of_backward, t.reduced));
    double in_flight = 0, behind_backward = 0;
    for (const distributed::BucketTiming& b : t.buckets) {
      in_flight += ms(b.launched, b.finished);
      behind_backward += std::max(0.0, ms(b.launched, std::min(b.finished, t.end_of_backward)));
    }
    hidden_fraction.push_back(in_flight > 0 ? behind_backward / in_flight : 0);
  }

  // The same buckets reduced with nothing to overlap with: as DDP does it (all launched with
  // allreduce_async, then waited for), and with blocking allreduces one after another.
  std::vector<Tensor> buffers;
  for (const distributed::BucketPlan& b : ddp.buckets()) buffers.push_back(zeros({b.numel}));
  std::vector<double> async_alone_ms, blocking_alone_ms;
  for (int s = 0; s < flags.steps; ++s) {
    group->barrier();
    auto start = Clock::now();
    std::vector<std::unique_ptr<distributed::Work>> works;
    for (const Tensor& b : buffers) works.push_back(group->allreduce_async(b, distributed::ReduceOp::Avg));
    for (auto& w : works) w->wait();
    async_alone_ms.push_back(ms(start, Clock::now()));
    group->barrier();
    start = Clock::now();
    for (const Tensor& b : buffers) group->allreduce(b, distributed::ReduceOp::Avg);
    blocking_alone_ms.push_back(ms(start, Clock::now()));
  }

  if (group->rank() != 0) return 0;
  std::printf("bench_ddp: %d ranks, batch %lld per rank, %zu bucket(s) of <= %.2f MiB, %d steps (first dropped)\n",
              group->size(), static_cast<long long>(flags.batch), ddp.buckets().size(), flags.bucket_mib, flags.steps);
  std::printf("median step %.2f ms, backward %.2f ms, exposed reduction %.2f ms (%.2f ms after the slower rank's "
              "backward ended), reduction alone %.2f ms async / %.2f ms blocking, in flight behind backward %.0f%%\n",
              median(step_ms), median(backward_ms), median(exposed_ms), median(after_slowest_ms),
              median(async_alone_ms), median(blocking_alone_ms), 100.0 * median(hidden_fraction));
  if (flags.timeline) {
    struct Event {
      double at;
      std::string what;
    };
    std::vector<Event> events;
    for (size_t i = 0; i < named.size(); ++i) events.push_back({ms(backward_start, grad_ready[i]), "gradient ready: " + named[i].first});
    const distributed::BackwardTimeline& t = ddp.last_timeline();
    for (size_t b = 0; b < t.buckets.size(); ++b) {
      const std::string name = "bucket " + std::to_string(b) + " (" + std::to_string(ddp.buckets()[b].numel) + " floats)";
      events.push_back({ms(backward_start, t.buckets[b].launched), name + " launched"});
      events.push_back({ms(backward_start, t.buckets[b].finished), name + " finished"});
    }
    events.push_back({ms(backward_start, t.end_of_backward), "end of backward (last node ran)"});
    events.push_back({ms(backward_start, t.reduced), "averaged gradients in .grad"});
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.at < b.at; });
    std::printf("timeline of the last step, ms from the start of backward (rank 0):\n");
    for (const Event& e : events) std::printf("  %8.3f  %s\n", e.at, e.what.c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_ddp: %s\n", e.what());
  return 1;
}
