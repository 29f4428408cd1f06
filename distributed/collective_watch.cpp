#include "distributed/collective_watch.h"

#include <mutex>
#include <utility>

#include "core/check.h"
#include "distributed/agreement.h"
#include "distributed/mpi_runtime.h"

namespace ember::distributed {

namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting rank reads the arrivals, to keep its termination report current; the
// first look comes after a short wait, so a collective that completes quickly formats nothing.
constexpr std::chrono::milliseconds kFirstLook{10}, kLookInterval{200};

std::string seconds(std::chrono::milliseconds duration) {
  return detail::concat(static_cast<double>(duration.count()) / 1000.0, " s");
}

// Clears the termination report however the wait ends, an Error from the poll included.
struct TerminationReportScope {
  TerminationReportScope() = default;
  ~TerminationReportScope() { clear_termination_report(); }
  TerminationReportScope(const TerminationReportScope&) = delete;
  TerminationReportScope& operator=(const TerminationReportScope&) = delete;
};

}  // namespace

CollectiveWatch::CollectiveWatch(int rank, int size, std::string ending)
    : rank_(rank), size_(size), ending_(std::move(ending)), arrived_(static_cast<size_t>(size), 0) {
  if (size_ == 1) return;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &arrivals_comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(arrivals_comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

CollectiveWatch::~CollectiveWatch() {
  // After a timeout the job ends in MPI_Abort, and MPI cannot be called once finalised.
  if (arrivals_comm_ == MPI_COMM_NULL || broken() || mpi_finalised()) return;
  for (Announcement& a : sending_) MPI_Wait(&a.request, MPI_STATUS_IGNORE);
  MPI_Comm_free(&arrivals_comm_);
}

CollectiveCall CollectiveWatch::begin(const char* name) {
  EMBER_CHECK(!broken(), "[", name, "] this process group can no longer be used: ", broken_);
  const CollectiveCall call{name, ++sequence_};
  if (size_ == 1) return call;
  // The announcements sent for earlier collectives that MPI has finished with are dropped.
  std::erase_if(sending_, [](Announcement& a) { return mpi_request_finished(a.request)(); });
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Announcement& a = sending_.emplace_back(Announcement{call.sequence, MPI_REQUEST_NULL});
    check_mpi(MPI_Isend(&a.sequence, 1, MPI_INT64_T, r, 0, arrivals_comm_, &a.request), "MPI_Isend");
  }
  read_arrivals();
  return call;
}

void CollectiveWatch::read_arrivals() {
  if (size_ == 1) return;
  for (;;) {
    int waiting = 0;
    MPI_Status status;
    check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, 0, arrivals_comm_, &waiting, &status), "MPI_Iprobe");
    if (!waiting) return;
    int64_t sequence = 0;
    check_mpi(MPI_Recv(&sequence, 1, MPI_INT64_T, status.MPI_SOURCE, 0, arrivals_comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    arrived_[static_cast<size_t>(status.MPI_SOURCE)] = sequence;
  }
}

std::vector<int> CollectiveWatch::missing(int64_t sequence) {
  read_arrivals();
  std::vector<int> ranks;
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && arrived_[static_cast<size_t>(r)] < sequence) ranks.push_back(r);
  return ranks;
}

void CollectiveWatch::report_waiting(const CollectiveCall& call) {
  const std::vector<int> ranks = missing(call.sequence);
  report_if_terminated(detail::concat("[distributed] rank ", rank_, " was terminated while waiting in ", call.name,
                                      " #", call.sequence, ranks.empty() ? std::string(" (every rank had reached it)")
                                                                         : " for " + rank_list(ranks),
                                      ": was that rank lost?\n"));
}

bool CollectiveWatch::wait_quietly(const std::function<bool()>& finished, const CollectiveCall& call,
                                   std::chrono::milliseconds timeout, const std::vector<Tensor>& buffers) {
  const TerminationReportScope report;
  const Clock::time_point start = Clock::now(), deadline = start + timeout;
  Clock::time_point next_look = start + kFirstLook;
  while (!finished()) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      abandon(call, timeout, buffers);
      return false;
    }
    if (now >= next_look) {
      report_waiting(call);
      next_look = now + kLookInterval;
    }
  }
  return true;
}

void CollectiveWatch::wait(const std::function<bool()>& finished, const CollectiveCall& call,
                           std::chrono::milliseconds timeout, const std::vector<Tensor>& buffers) {
  if (!wait_quietly(finished, call, timeout, buffers)) EMBER_FAIL(broken_);
}

void CollectiveWatch::abandon(const CollectiveCall& call, std::chrono::milliseconds timeout,
                              const std::vector<Tensor>& buffers) {
  const std::vector<int> ranks = missing(call.sequence);
  std::string who;
  for (int r : ranks)
    who += detail::concat(who.empty() ? "" : ", ", r, arrived_[static_cast<size_t>(r)] == 0
                                                          ? std::string(" (it reached none)")
                                                          : detail::concat(" (the last it reached was #",
                                                                           arrived_[static_cast<size_t>(r)], ")"));
  broken_ = detail::concat(
      "[", call.name, "] collective #", call.sequence, " of this process group timed out after ", seconds(timeout),
      " on rank ", rank_, ": ",
      ranks.empty() ? std::string(size_ == 1 ? "it did not complete (the work queued before it did not finish)"
                                             : "every rank reached it, but it did not complete (a rank stalled "
                                               "inside it, the network between ranks failed during it, or the ranks "
                                               "started different non-blocking collectives)")
                    : detail::concat(ranks.size() == 1 ? "rank " : "ranks ", who,
                                     " did not arrive (stopped, crashed, or ran fewer steps or other collectives)"),
      "; ", ending_);
  keep_until_exit(buffers);
  abort_mpi_at_exit();
}

// Kept for the rest of the process rather than with their group: the backend may still write
// them after the group is gone (an MPI request cannot be cancelled, and an aborted NCCL collective
// may still be queued on its stream). Never freed: the process ends with MPI_Abort anyway, and
// freeing a CUDA tensor after the runtime has shut down would fail.
void keep_until_exit(const std::vector<Tensor>& buffers) {
  static std::mutex mutex;
  static auto* const kept = new std::vector<Tensor>();  // leaked on purpose (see above)
  const std::lock_guard<std::mutex> lock(mutex);
  kept->insert(kept->end(), buffers.begin(), buffers.end());
}

std::function<bool()> mpi_request_finished(MPI_Request& request) {
  return [&request] {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  };
}

}  // namespace ember::distributed
