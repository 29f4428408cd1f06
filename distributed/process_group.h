#pragma once
// Note [Process groups]
// Data-parallel training runs one process per model replica; a launcher (mpirun) starts them
// all and tells each its rank (0 .. size-1) and the world size through the environment. A
// ProcessGroup is what the processes share: their rank and size, and the collectives every rank
// calls in the same order with tensors of the same shape and dtype:
//   allreduce  every rank ends with the elementwise sum (or average) of all ranks' tensors
//   broadcast  every rank ends with root's tensor
//   allgather  every rank gets all ranks' tensors stacked along a new first dimension
//   barrier    returns once every rank has reached it
// The blocking collectives first exchange a small header (which collective, dtype, shape, root),
// so a rank that calls with a different tensor gets an ember::Error on every rank, naming both
// ranks' tensors, instead of a hang or garbage. allreduce_async skips that exchange (it is what
// DistributedDataParallel launches during backward, where a blocking exchange would stall the
// backward; DDP checks its buckets' layout once, at construction) and returns a Work to wait on.
// The backend is a subclass: MpiProcessGroup (CPU tensors, Open MPI) is built when MPI is found
// (EMBER_MPI), NcclProcessGroup (CUDA tensors, one device per rank; Note [NCCL collectives]) when
// the CUDA backend is built and NCCL is found as well (EMBER_NCCL).
// Every collective of either backend, and DDP's wait for its buckets, gives up after the group's
// timeout with an Error naming the collective and the ranks that did not arrive (Note
// [Collective timeouts] in distributed/collective_watch.h).
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace ember::distributed {

enum class ReduceOp { Sum, Avg };

// How long a collective waits for the other ranks before it fails: long enough for a rank that
// evaluates or saves a checkpoint while the others wait in their next reduction.
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(5);
enum class Backend { MPI, NCCL };

const char* backend_name(Backend backend);

// A collective started by allreduce_async. Until wait() returns, the tensor belongs to the
// collective: do not read or write it. (On CUDA tensors wait() returns once the collective has
// finished on the device, and every ember op queued after it runs after the collective.)
class Work {
 public:
  virtual ~Work() = default;
  // Lets the collective progress and says whether it has finished (MPI moves a non-blocking
  // collective forward only inside MPI calls, so a caller with other work polls this).
  virtual bool test() = 0;
  // Blocks until the collective has finished and the tensor holds its result.
  virtual void wait() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  // Where the tensors this group's collectives take live: the CPU (MPI), this rank's GPU (NCCL).
  virtual Device device() const = 0;

  // In place: `tensor` becomes the sum (or average; floating dtypes only) over all ranks.
  virtual void allreduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  // In place, without the header check; `tensor` must be contiguous.
  virtual std::unique_ptr<Work> allreduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  // In place: every rank's `tensor` becomes root's.
  virtual void broadcast(const Tensor& tensor, int root = 0) = 0;
  // Returns the ranks' tensors stacked: shape [size, *tensor.shape()], rank r's at index r.
  virtual Tensor allgather(const Tensor& tensor) = 0;
  virtual void barrier() = 0;

  // How long each collective (and each Work::wait) waits for the other ranks; > 0.
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout);

 private:
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

// Rank and size as the launcher set them in the environment: Open MPI's mpirun sets
// OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE, MPICH's and Intel MPI's PMI_RANK / PMI_SIZE.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  // Which of its machine's processes this one is (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's
  // MPI_LOCALRANKID; `rank` when the launcher sets neither): the NCCL backend uses GPU local_rank.
  int local_rank = 0;
  std::string variables;  // which pair was read, for messages
};
// None when the process was not started by a launcher; an Error when the variables are there
// but not a valid rank and size.
std::optional<LaunchInfo> launch_info_from_environment();

struct InitOptions {
  Backend backend = Backend::MPI;
  // Started without a launcher, a program fails with an Error saying how to launch it, unless
  // this is false: then it runs as a group of one process (rank 0, size 1), which exercises the
  // same code path without mpirun (tests, or a distributed program run on one process).
  bool require_launcher = true;
  std::chrono::milliseconds timeout = kDefaultTimeout;  // ProcessGroup::set_timeout
};

// The group of all processes the launcher started. MPI is initialised on the first call and
// finalised at exit (the NCCL backend uses MPI only to start a group of more than one rank).
std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options = {});

}  // namespace ember::distributed
