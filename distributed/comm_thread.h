#pragma once
// Note [The communication thread]
// Open MPI advances a non-blocking collective only while some thread is inside an MPI call. If
// the training thread launched MPI_Iallreduce and went back to computing, the reduction would
// stand still until its next MPI call (bench/RESULTS.md measured exactly that: reductions launched
// early in backward still left most of their cost for the end). So a process group hands every
// MPI call to one thread of its own, which runs them one at a time in the order they were
// submitted (MPI_THREAD_SERIALIZED: one thread in MPI at a time, and it is always this one): a
// blocking collective there (MPI_Allreduce) runs to completion while the training thread goes on
// with backward. The order of submission is the order of the collectives on every rank, as MPI
// needs. A blocking call of the group's API submits its task and waits for it; an asynchronous
// one returns the task's future.
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace ember::distributed {

class CommThread {
 public:
  CommThread();
  ~CommThread();  // runs what is queued, then stops
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `task`; the future is ready when it has run (and rethrows what it threw).
  std::shared_future<void> submit(std::function<void()> task);
  // Queues `task` and waits for it.
  void run(std::function<void()> task) { submit(std::move(task)).get(); }

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the members it uses exist
};

}  // namespace ember::distributed
