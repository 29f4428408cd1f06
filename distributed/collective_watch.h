#pragma once
// Note [Collective timeouts]
// A blocking collective cannot be cancelled: a rank that stopped (a crash the launcher has not
// noticed yet, SIGSTOP, a rank stuck in its own code, one that ran out of batches) leaves the
// others inside MPI_Allreduce, or behind an NCCL kernel, for ever. So no backend blocks in one:
// each collective is started without waiting (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather,
// MPI_Ibarrier; an NCCL call on a non-blocking communicator, whose end is a CUDA event) and the
// host polls it until it completes or the group's timeout has passed since the wait began. For
// MPI the poll (MPI_Test) is what moves the collective forward, so the loop does not sleep
// between polls (MPI_Wait spins the same way).
// Which ranks to blame: every rank numbers its group's collectives 1, 2, ... (the header
// exchange of Note [Process groups] belongs to the collective it checks) and, on entering #n,
// tells every other rank "I reached #n" in one int64 point-to-point MPI message, sent
// non-blocking on a communicator of its own so that it never matches a collective's traffic (an
// NCCL group of several ranks has MPI too: Note [Starting an NCCL group]). Each rank reads the
// messages that have arrived (MPI_Iprobe, then MPI_Recv) at its next collective and when it
// gives up; MPI keeps the messages between two ranks in order, so the last one read is how far
// that rank got. A rank that never announced #n did not arrive; if every rank did, the
// collective was started but did not finish (a rank stalled inside it, or the ranks started
// different non-blocking collectives, which skip the header check). The cost is size - 1 small
// messages per collective per rank, which against one reduction of a bucket is nothing; a job of
// thousands of ranks would want a tree instead. A group of one sends nothing and needs no MPI.
// A timed-out collective is abandoned, not cancelled (MPI cannot cancel a collective request;
// NCCL can only abort the whole communicator, which its backend then does): its buffers are
// kept alive until the process ends, past their group's end, the watch refuses every later
// collective, and the process ends with MPI_Abort instead of MPI_Finalize (mpi_runtime.h), which
// would wait for the stopped rank. The same holds for every other collective of the group that
// was started and not yet seen to finish (an async Work dropped after the timeout, DDP's other
// buckets): the stopped rank may still join it, and any later MPI call (a retry in a second
// group, a barrier before saving) then completes it into its buffers. So a Work dropped unwaited
// on a broken group hands its buffers to keep_until_exit too.
// While a rank waits, what it waits for and for whom is kept ready for a signal handler, so a
// rank that mpirun terminates because a peer died says which rank it was waiting for.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::distributed {

// One collective call: its name for messages and its number in the group's order.
struct CollectiveCall {
  const char* name = "";
  int64_t sequence = 0;
};

// Numbers a group's collectives, tells the other ranks which one this rank reached, and waits
// for one with the group's timeout (Note [Collective timeouts]).
class CollectiveWatch {
 public:
  // A group of more than one rank of MPI_COMM_WORLD announces its arrivals over MPI (which must
  // be running then); `ending` says, in the timeout's message, what happens to the job.
  CollectiveWatch(int rank, int size, std::string ending);
  ~CollectiveWatch();
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Numbers the next collective and tells the other ranks this one reached it; an Error when an
  // earlier collective timed out.
  CollectiveCall begin(const char* name);
  // Calls `finished` until it says true or `timeout` passes: on expiry, abandons the collective
  // (keeping `buffers`, the memory it reads and writes, alive) and throws the Error of Note
  // [Collective timeouts]. An Error from `finished` (the collective failed) goes through.
  void wait(const std::function<bool()>& finished, const CollectiveCall& call, std::chrono::milliseconds timeout,
            const std::vector<Tensor>& buffers);
  // The same without throwing on expiry, for a destructor or a backend with more to do before
  // it throws: false when it timed out (and was abandoned).
  bool wait_quietly(const std::function<bool()>& finished, const CollectiveCall& call,
                    std::chrono::milliseconds timeout, const std::vector<Tensor>& buffers);
  bool broken() const { return !broken_.empty(); }
  // The timeout's message, once one happened.
  const std::string& why_broken() const { return broken_; }

 private:
  void abandon(const CollectiveCall& call, std::chrono::milliseconds timeout, const std::vector<Tensor>& buffers);
  void read_arrivals();
  std::vector<int> missing(int64_t sequence);
  void report_waiting(const CollectiveCall& call);

  int rank_ = 0;
  int size_ = 1;
  std::string ending_;
  MPI_Comm arrivals_comm_ = MPI_COMM_NULL;  // only in a group of more than one
  int64_t sequence_ = 0;
  std::vector<int64_t> arrived_;  // per rank, the last collective it announced
  struct Announcement {
    int64_t sequence = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::list<Announcement> sending_;  // a list: MPI holds the address of each one's sequence
  std::string broken_;
};

// Keeps `buffers` alive until the process ends: the memory of a collective that was started and
// whose end will never be observed (it timed out, or its group broke before anyone waited for
// it). The backend may still read or write it, and a block given back to the caching allocator
// would be written under the tensor it goes to next.
void keep_until_exit(const std::vector<Tensor>& buffers);

// A poll for collective_watch's wait: MPI_Test on `request`.
std::function<bool()> mpi_request_finished(MPI_Request& request);

}  // namespace ember::distributed
