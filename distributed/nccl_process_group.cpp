// Note [NCCL collectives]
// NCCL runs a collective as a kernel on a CUDA stream: the host only enqueues it. ember does all
// of a device's work on one stream (Note [One stream per device] in cuda/context.h); the
// collectives run on a second stream of the group's own, so that a reduction DDP launches in
// backward runs on the GPU while the backward kernels that follow it run on ember's stream.
// Two events keep the streams ordered, for every collective alike:
//   ready  recorded on ember's stream when the collective is called; the communication stream
//          waits for it, so the collective reads what the ember ops before it wrote;
//   done   recorded on the communication stream after the collective; Work::wait() makes ember's
//          stream wait for it, so the ember ops after it read the result.
// Starting a collective does not block the host. Waiting for one does (Note [Collective
// timeouts]): the host polls `done` (cudaEventQuery, and ncclCommGetAsyncError for NCCL's own
// failures) until it has happened or the group's timeout has passed, and only then makes ember's
// stream wait for it. So ember's stream never waits for a collective that has not finished, and
// a rank that stops can stall this rank's host only as long as the timeout, never its device
// work for ever. A blocking collective (allreduce, broadcast, allgather, barrier) waits at its
// end; allreduce_async's Work waits in wait(), which is how DDP's buckets end at the end of
// backward. The price is one host synchronisation per collective: the blocking collectives had
// one already (their header exchange reads its words back), and DDP's host then queues the
// optimizer step only after the last bucket, not while it is reduced.
// The communicator is non-blocking (ncclConfig_t::blocking = 0) for the same reason: NCCL's calls
// (the start, connecting to the peers at a first collective, the end) then return
// ncclInProgress instead of waiting for the other ranks, and the host polls
// ncclCommGetAsyncError under the same timeout.
// After a timeout the group refuses further collectives. Its communicator is aborted
// (ncclCommAbort, which ends NCCL's kernels) when the group is destroyed rather than at the
// timeout: a collective still queued behind other work at the timeout may have run by then, and
// a kernel that starts after its communicator was freed would read freed memory.
// Memory: ember's caching allocator hands a freed block to the next allocation with no event
// (its safety rests on the one stream). A tensor the communication stream uses is therefore held
// until ember's stream has been made to wait for `done`: by the Work (whose destructor waits if
// wait() was never called), or by the blocking call itself; a collective that timed out keeps
// its tensors for as long as the process lives. A block freed after that is reused only by work
// queued after the collective.
// The header exchange of the blocking collectives (collective_check.h) gathers its int64 words
// through NCCL as well, on the device, and reads them back on the host.
//
// Note [Starting an NCCL group]
// Every rank of an NCCL communicator must pass ncclCommInitRank the same ncclUniqueId, which one
// rank creates (ncclGetUniqueId). Rank 0 creates it and sends it to the others over MPI (MPI's
// world is the launcher's processes), together with whether it got one, so that a failure there
// is an Error on every rank rather than the others waiting for an id that never comes. A group
// of one needs no one to share with: it creates its own, and never starts MPI (which is how it
// runs on a machine that has no MPI installed). Each process uses the GPU of its local rank, one
// GPU per process, as NCCL requires. The communicator's start is the group's collective #1 for
// Note [Collective timeouts]: a rank that never starts its group is named after the timeout.
#include "distributed/nccl_process_group.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "distributed/collective_check.h"
#include "distributed/collective_watch.h"
#include "distributed/mpi_runtime.h"
#include "distributed/nccl_library.h"

namespace ember::distributed {

namespace {

using std::chrono::milliseconds;

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::UInt8: return ncclUint8;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
  }
  EMBER_FAIL("[distributed] unknown dtype");
}

size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }

// A CUDA event of the current device, destroyed with its owner (the driver keeps a recorded
// event until the work before it has run).
class Event {
 public:
  Event() { CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~Event() {
    if (event_) (void)cudaEventDestroy(event_);  // a destructor must not throw
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// The communicator, its stream and the watch over its collectives, shared by the group and the
// Works it hands out (a Work may outlive its group).
class Communicator {
 public:
  Communicator(int rank, int size, int device, const ncclUniqueId& id, milliseconds timeout)
      : device_(device), compute_(cuda::stream(device)),
        watch_(rank, size, size == 1 ? "the communicator is aborted when the group is destroyed"
                                     : "the communicator is aborted when the group is destroyed, and the MPI job "
                                       "when this process exits") {
    cuda::DeviceGuard guard(device);
    // Non-blocking: a copy on the legacy default stream in user code must not queue behind a
    // collective that waits for another rank. The events order it with ember's stream.
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // Note [NCCL collectives]
    const CollectiveCall call = watch_.begin("init_process_group");
    try {
      const ncclResult_t started = nccl().comm_init_rank_config(&comm_, size, id, rank, &config);
      if (started != ncclInProgress) check(started, "ncclCommInitRankConfig");
      if (comm_) wait_for_nccl(call, timeout, {});
    } catch (...) {
      if (comm_) (void)nccl().comm_abort(comm_);
      (void)cudaStreamDestroy(stream_);
      throw;
    }
  }

  ~Communicator() {
    // A communicator in good order with nothing left on its stream is finalised (bounded like a
    // collective), then destroyed; one that failed or timed out, or whose stream still holds
    // work, is aborted. Errors are ignored: a destructor must not throw.
    bool aborting = broken() || cudaStreamQuery(stream_) != cudaSuccess;
    (void)cudaGetLastError();  // Note [Clearing the CUDA error state]
    if (!aborting) {
      try {
        const ncclResult_t finalising = nccl().comm_finalize(comm_);
        aborting = !(finalising == ncclSuccess ||
                     (finalising == ncclInProgress &&
                      watch_.wait_quietly(nccl_done(), CollectiveCall{"the communicator's end", 0}, last_timeout_, {})));
      } catch (const Error&) {
        aborting = true;
      }
    }
    (void)(aborting ? nccl().comm_abort(comm_) : nccl().comm_destroy(comm_));
    (void)cudaStreamDestroy(stream_);
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  CollectiveCall begin(const char* name) {
    EMBER_CHECK(!failed_, "[", name, "] this process group can no longer be used: an earlier NCCL call failed");
    return watch_.begin(name);
  }

  // Queues `collective` (an NCCL call on the stream it is given) on the communication stream
  // after what ember's stream holds so far; returns the event that marks its end. `buffers` are
  // what it reads and writes, kept alive if it is abandoned.
  template <class Call>
  Event enqueue(const char* what, const CollectiveCall& call, milliseconds timeout, const std::vector<Tensor>& buffers,
                Call collective) {
    cuda::DeviceGuard guard(device_);
    const Event ready;
    CUDA_CHECK(cudaEventRecord(ready.get(), compute_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, ready.get(), 0));
    const ncclResult_t queued = collective(stream_);
    if (queued == ncclInProgress)
      wait_for_nccl(call, timeout, buffers);  // nothing may touch the stream before the call is queued
    else
      check(queued, what);
    Event done;
    CUDA_CHECK(cudaEventRecord(done.get(), stream_));
    return done;
  }

  // Whether the collective that ends at `done` has finished; an Error when NCCL reports that
  // one of its collectives failed (a peer's connection lost, for example).
  bool finished(const Event& done) {
    const cudaError_t state = cudaEventQuery(done.get());
    if (state != cudaErrorNotReady) {
      CUDA_CHECK(state);
      return true;
    }
    (void)cudaGetLastError();  // "not yet" is no error for the next CUDA_CHECK to find (Note [Clearing the CUDA error state])
    ncclResult_t nccl_state = ncclSuccess;
    check(nccl().comm_get_async_error(comm_, &nccl_state), "ncclCommGetAsyncError");
    if (nccl_state != ncclInProgress) check(nccl_state, "an NCCL collective");  // in progress: a call still being queued
    return false;
  }

  // Waits on the host, up to `timeout`, for the collective that ends at `done`; then ember's
  // stream waits for it too. False when it timed out (the watch has abandoned it).
  bool wait_quietly(const Event& done, const CollectiveCall& call, milliseconds timeout,
                    const std::vector<Tensor>& buffers) {
    last_timeout_ = timeout;
    if (!watch_.wait_quietly([&] { return finished(done); }, call, timeout, buffers)) return false;
    CUDA_CHECK(cudaStreamWaitEvent(compute_, done.get(), 0));
    return true;
  }
  void wait(const Event& done, const CollectiveCall& call, milliseconds timeout, const std::vector<Tensor>& buffers) {
    if (!wait_quietly(done, call, timeout, buffers)) EMBER_FAIL(watch_.why_broken());
  }

  bool broken() const { return failed_ || watch_.broken(); }
  ncclComm_t handle() const { return comm_; }
  int rank() const { return watch_.rank(); }
  int size() const { return watch_.size(); }

 private:
  // Turns an NCCL result into an Error naming the call, NCCL's word for the result and, where
  // NCCL recorded one, its explanation. A failed communicator can only be aborted (NCCL's rule),
  // which the destructor does.
  void check(ncclResult_t result, const char* call) {
    if (result == ncclSuccess) return;
    failed_ = true;
    const char* detail = nccl().get_last_error(comm_);
    EMBER_FAIL("[distributed] ", call, " failed: ", nccl().get_error_string(result),
               detail && *detail ? detail::concat(" (", detail, ")") : std::string());
  }

  // A poll that is done once the communicator has no NCCL call in progress.
  std::function<bool()> nccl_done() {
    return [this] {
      ncclResult_t state = ncclSuccess;
      check(nccl().comm_get_async_error(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclInProgress) return false;
      check(state, "an NCCL call");
      return true;
    };
  }
  // Polls until NCCL's call in progress is done, up to `timeout`; on expiry, the Error of Note
  // [Collective timeouts], and the communicator is to be aborted (NCCL is inside the call).
  void wait_for_nccl(const CollectiveCall& call, milliseconds timeout, const std::vector<Tensor>& buffers) {
    last_timeout_ = timeout;
    if (watch_.wait_quietly(nccl_done(), call, timeout, buffers)) return;
    failed_ = true;
    EMBER_FAIL(watch_.why_broken());
  }

  int device_;
  cudaStream_t compute_;           // ember's stream of the device
  cudaStream_t stream_ = nullptr;  // the collectives' own
  ncclComm_t comm_ = nullptr;
  CollectiveWatch watch_;
  bool failed_ = false;  // an NCCL call failed or did not end in time
  milliseconds last_timeout_ = kDefaultTimeout;
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Communicator> comm, CollectiveCall call, Event done, Tensor tensor, milliseconds timeout)
      : comm_(std::move(comm)), call_(call), done_(std::move(done)), tensor_(std::move(tensor)), timeout_(timeout) {}
  ~NcclWork() override {
    // Never dropped unfinished: ember's stream waits, so tensor_'s memory is reused only after
    // the collective; one that does not finish in time, or whose group is already broken, is
    // abandoned and keeps tensor_ (Note [NCCL collectives]). A destructor must not throw: a
    // failure here was the collective's.
    if (waited_) return;
    if (comm_->broken()) {
      keep_until_exit({tensor_});
      return;
    }
    try {
      comm_->wait_quietly(done_, call_, timeout_, {tensor_});
    } catch (const Error&) {
    }
  }
  bool test() override { return waited_ || comm_->finished(done_); }
  void wait() override {
    if (waited_) return;
    comm_->wait(done_, call_, timeout_, {tensor_});
    waited_ = true;
  }

 private:
  std::shared_ptr<Communicator> comm_;
  CollectiveCall call_;
  Event done_;
  Tensor tensor_;  // held until ember's stream waits for done_ (Note [NCCL collectives])
  milliseconds timeout_;
  bool waited_ = false;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int size, int device, const ncclUniqueId& id, milliseconds timeout)
      : device_(DeviceType::CUDA, device), comm_(std::make_shared<Communicator>(rank, size, device, id, timeout)) {}

  int rank() const override { return comm_->rank(); }
  int size() const override { return comm_->size(); }
  Backend backend() const override { return Backend::NCCL; }
  Device device() const override { return device_; }

  void allreduce(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce");
    check_reduce_op(tensor, op, "allreduce");
    const CollectiveCall call = check_same_call(Collective::Allreduce, tensor, 0);
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      comm_->wait(start_allreduce(call, buffer, op), call, timeout(), {buffer});
    });
  }

  std::unique_ptr<Work> allreduce_async(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce_async");
    check_reduce_op(tensor, op, "allreduce_async");
    EMBER_CHECK(tensor.is_contiguous(), "[allreduce_async] the tensor must be contiguous (the result lands in it)");
    const CollectiveCall call = comm_->begin("allreduce_async");
    return std::make_unique<NcclWork>(comm_, call, start_allreduce(call, tensor, op), tensor, timeout());
  }

  void broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    const CollectiveCall call = check_same_call(Collective::Broadcast, tensor, root);
    check_root(root, size(), "broadcast");
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      const Event done = comm_->enqueue("ncclBroadcast", call, timeout(), {buffer}, [&](cudaStream_t s) {
        return nccl().broadcast(buffer.raw_data(), buffer.raw_data(), count(buffer), nccl_type(buffer.dtype()), root,
                                comm(), s);
      });
      comm_->wait(done, call, timeout(), {buffer});
    });
  }

  Tensor allgather(const Tensor& tensor) override {
    check_tensor(tensor, "allgather");
    const CollectiveCall call = check_same_call(Collective::Allgather, tensor, 0);
    Shape shape = tensor.shape();
    shape.insert(shape.begin(), size());
    Tensor all = empty(shape, TensorOptions(tensor.dtype()).with_device(device_));
    gather_into(call, tensor.contiguous(), all);
    return all;
  }

  void barrier() override {
    // NCCL has no barrier: a one-element allreduce that every rank must join, waited for here.
    const CollectiveCall call = comm_->begin("barrier");
    const Tensor token = zeros({1}, TensorOptions(kFloat32).with_device(device_));
    comm_->wait(start_allreduce(call, token, ReduceOp::Sum), call, timeout(), {token});
  }

 private:
  void check_tensor(const Tensor& t, const char* op) const {
    EMBER_CHECK(t.defined(), "[", op, "] got an undefined tensor");
    EMBER_CHECK(t.device() == device_, "[", op, "] the NCCL backend works on CUDA tensors on this rank's device ",
                device_, "; got a tensor on ", t.device(),
                t.device().is_cpu() ? " (CPU tensors need the MPI backend, or .to(the group's device()) first)" : "");
  }

  ncclComm_t comm() const { return comm_->handle(); }

  Event start_allreduce(const CollectiveCall& call, const Tensor& buffer, ReduceOp op) {
    return comm_->enqueue("ncclAllReduce", call, timeout(), {buffer}, [&](cudaStream_t s) {
      return nccl().all_reduce(buffer.raw_data(), buffer.raw_data(), count(buffer), nccl_type(buffer.dtype()),
                               op == ReduceOp::Avg ? ncclAvg : ncclSum, comm(), s);
    });
  }

  // `all` (contiguous, size() times mine's elements) gets every rank's `mine`, rank r's at r.
  void gather_into(const CollectiveCall& call, const Tensor& mine, const Tensor& all) {
    const Event done = comm_->enqueue("ncclAllGather", call, timeout(), {mine, all}, [&](cudaStream_t s) {
      return nccl().all_gather(mine.raw_data(), all.raw_data(), count(mine), nccl_type(mine.dtype()), comm(), s);
    });
    comm_->wait(done, call, timeout(), {mine, all});
  }

  // Numbers the collective, then the header exchange (Note [Process groups]), itself bounded by
  // the timeout: a rank that never arrives is found here, before any data moves.
  CollectiveCall check_same_call(Collective collective, const Tensor& tensor, int root) {
    const CollectiveCall call = comm_->begin(collective_name(collective));
    check_same_call_on_all_ranks(collective, tensor, root, size(), [&](const std::vector<int64_t>& words) {
      const auto n = static_cast<int64_t>(words.size());
      if (n == 0) return std::vector<int64_t>{};  // a scalar's sizes: all ranks have 0 dimensions here
      const Tensor mine = from_vector(words, {n}, TensorOptions(kInt64)).to(device_);
      const Tensor all = empty({size() * n}, TensorOptions(kInt64).with_device(device_));
      gather_into(call, mine, all);
      return all.to_vector<int64_t>();
    });
    return call;
  }

  Device device_;
  std::shared_ptr<Communicator> comm_;
};

// What rank 0 sends the others (Note [Starting an NCCL group]).
struct StartMessage {
  ncclResult_t result = ncclSuccess;
  ncclUniqueId id{};
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::optional<LaunchInfo>& launch, milliseconds timeout) {
  const LaunchInfo where = launch.value_or(LaunchInfo{});
  const int devices = cuda::device_count();
  EMBER_CHECK(devices > 0, "[init_process_group] the NCCL backend needs a CUDA device, and none is available (no "
              "GPU, or no driver); use Backend::MPI with CPU tensors");
  EMBER_CHECK(where.local_rank < devices, "[init_process_group] rank ", where.rank, " is process ", where.local_rank,
              " of its machine, which has ", devices, " CUDA device(s): the NCCL backend needs a device per "
              "process, so start at most ", devices, " process(es) per machine");
  nccl();  // loaded on every rank before any waits for rank 0's message (Note [NCCL loaded at run time])
  StartMessage message;
  if (where.rank == 0) message.result = nccl().get_unique_id(&message.id);
  if (where.size > 1) {
    ensure_mpi(launch);
    broadcast_bytes_over_mpi(&message, static_cast<int>(sizeof message), 0);
  }
  EMBER_CHECK(message.result == ncclSuccess, "[distributed] ", where.rank == 0 ? "ncclGetUniqueId" : "ncclGetUniqueId on rank 0",
              " failed: ", nccl().get_error_string(message.result));
  return std::make_shared<NcclProcessGroup>(where.rank, where.size, where.local_rank, message.id, timeout);
}

}  // namespace ember::distributed
