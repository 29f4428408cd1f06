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
// Neither blocks the host. A blocking collective (allreduce, broadcast, allgather) is the same
// with the wait at its end: when it returns, the result is what any later ember op on the device
// sees, and copying it to the host (.item(), .to(kCPU)) waits for it. barrier() alone waits on
// the host, which is what a barrier is for.
// Memory: ember's caching allocator hands a freed block to the next allocation with no event
// (its safety rests on the one stream). A tensor the communication stream uses is therefore held
// until ember's stream has been made to wait for `done`: by the Work (whose destructor waits if
// wait() was never called), or by the blocking call itself. A block freed after that is reused
// only by work queued after the collective.
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
// GPU per process, as NCCL requires.
#include "distributed/nccl_process_group.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "distributed/collective_check.h"
#include "distributed/mpi_runtime.h"
#include "distributed/nccl_library.h"

namespace ember::distributed {

namespace {

// Turns an NCCL result into an Error naming the call, NCCL's word for the result and, where NCCL
// recorded one, its explanation.
void check_nccl(ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess) return;
  const char* detail = nccl().get_last_error(comm);
  EMBER_FAIL("[distributed] ", call, " failed: ", nccl().get_error_string(result),
             detail && *detail ? detail::concat(" (", detail, ")") : std::string());
}

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

class NcclWork final : public Work {
 public:
  NcclWork(Event done, Tensor tensor, cudaStream_t compute, ncclComm_t comm)
      : done_(std::move(done)), tensor_(std::move(tensor)), compute_(compute), comm_(comm) {}
  ~NcclWork() override {
    // Never abandoned: ember's stream waits, so tensor_'s memory is reused only after the collective.
    if (!waited_) (void)cudaStreamWaitEvent(compute_, done_.get(), 0);
  }
  bool test() override {
    const cudaError_t state = cudaEventQuery(done_.get());
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not yet" is no error for the next CUDA_CHECK to find (Note [Clearing the CUDA error state])
      ncclResult_t failure = ncclSuccess;
      check_nccl(nccl().comm_get_async_error(comm_, &failure), "ncclCommGetAsyncError", comm_);
      check_nccl(failure, "an NCCL collective", comm_);
      return false;
    }
    CUDA_CHECK(state);
    return true;
  }
  void wait() override {
    if (waited_) return;
    CUDA_CHECK(cudaStreamWaitEvent(compute_, done_.get(), 0));
    waited_ = true;
  }

 private:
  Event done_;
  Tensor tensor_;  // held until ember's stream waits for done_ (Note [NCCL collectives])
  cudaStream_t compute_;
  ncclComm_t comm_;
  bool waited_ = false;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int size, int device, const ncclUniqueId& id)
      : rank_(rank), size_(size), device_(DeviceType::CUDA, device), compute_(cuda::stream(device)) {
    cuda::DeviceGuard guard(device);
    // Non-blocking: a copy on the legacy default stream in user code must not queue behind a
    // collective that waits for another rank. The events order it with ember's stream.
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const ncclResult_t result = nccl().comm_init_rank(&comm_, size, id, rank);
    if (result != ncclSuccess) {
      (void)cudaStreamDestroy(stream_);
      check_nccl(result, "ncclCommInitRank", nullptr);
    }
  }
  ~NcclProcessGroup() override {
    // The collectives still queued finish first (ncclCommDestroy frees what they use). None of
    // these calls needs the current device; errors are ignored, as a destructor must not throw.
    (void)cudaStreamSynchronize(stream_);
    (void)nccl().comm_destroy(comm_);
    (void)cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::NCCL; }
  Device device() const override { return device_; }

  void allreduce(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce");
    check_reduce_op(tensor, op, "allreduce");
    check_same_call(Collective::Allreduce, tensor, 0);
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) { wait_on_compute(start_allreduce(buffer, op)); });
  }

  std::unique_ptr<Work> allreduce_async(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce_async");
    check_reduce_op(tensor, op, "allreduce_async");
    EMBER_CHECK(tensor.is_contiguous(), "[allreduce_async] the tensor must be contiguous (the result lands in it)");
    return std::make_unique<NcclWork>(start_allreduce(tensor, op), tensor, compute_, comm_);
  }

  void broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    check_same_call(Collective::Broadcast, tensor, root);
    check_root(root, size_, "broadcast");
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      wait_on_compute(enqueue("ncclBroadcast", [&](cudaStream_t s) {
        return nccl().broadcast(buffer.raw_data(), buffer.raw_data(), count(buffer), nccl_type(buffer.dtype()), root,
                             comm_, s);
      }));
    });
  }

  Tensor allgather(const Tensor& tensor) override {
    check_tensor(tensor, "allgather");
    check_same_call(Collective::Allgather, tensor, 0);
    Shape shape = tensor.shape();
    shape.insert(shape.begin(), size_);
    Tensor all = empty(shape, TensorOptions(tensor.dtype()).with_device(device_));
    gather_into(tensor.contiguous(), all);
    return all;
  }

  void barrier() override {
    // NCCL has no barrier: a one-element allreduce that every rank must join, waited for here.
    const Tensor token = zeros({1}, TensorOptions(kFloat32).with_device(device_));
    const Event done = start_allreduce(token, ReduceOp::Sum);
    CUDA_CHECK(cudaEventSynchronize(done.get()));
  }

 private:
  void check_tensor(const Tensor& t, const char* op) const {
    EMBER_CHECK(t.defined(), "[", op, "] got an undefined tensor");
    EMBER_CHECK(t.device() == device_, "[", op, "] the NCCL backend works on CUDA tensors on this rank's device ",
                device_, "; got a tensor on ", t.device(),
                t.device().is_cpu() ? " (CPU tensors need the MPI backend, or .to(the group's device()) first)" : "");
  }

  // Queues `collective` (an NCCL call on the stream it is given) on the communication stream
  // after what ember's stream holds so far; returns the event that marks its end.
  template <class Call>
  Event enqueue(const char* call, Call collective) {
    cuda::DeviceGuard guard(device_.index);
    const Event ready;
    CUDA_CHECK(cudaEventRecord(ready.get(), compute_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, ready.get(), 0));
    check_nccl(collective(stream_), call, comm_);
    Event done;
    CUDA_CHECK(cudaEventRecord(done.get(), stream_));
    return done;
  }

  void wait_on_compute(const Event& done) { CUDA_CHECK(cudaStreamWaitEvent(compute_, done.get(), 0)); }

  Event start_allreduce(const Tensor& buffer, ReduceOp op) {
    return enqueue("ncclAllReduce", [&](cudaStream_t s) {
      return nccl().all_reduce(buffer.raw_data(), buffer.raw_data(), count(buffer), nccl_type(buffer.dtype()),
                           op == ReduceOp::Avg ? ncclAvg : ncclSum, comm_, s);
    });
  }

  // `all` (contiguous, size_ times mine's elements) gets every rank's `mine`, rank r's at r.
  void gather_into(const Tensor& mine, const Tensor& all) {
    wait_on_compute(enqueue("ncclAllGather", [&](cudaStream_t s) {
      return nccl().all_gather(mine.raw_data(), all.raw_data(), count(mine), nccl_type(mine.dtype()), comm_, s);
    }));
  }

  void check_same_call(Collective collective, const Tensor& tensor, int root) {
    check_same_call_on_all_ranks(collective, tensor, root, size_, [this](const std::vector<int64_t>& words) {
      const auto n = static_cast<int64_t>(words.size());
      if (n == 0) return std::vector<int64_t>{};  // a scalar's sizes: all ranks have 0 dimensions here
      const Tensor mine = from_vector(words, {n}, TensorOptions(kInt64)).to(device_);
      const Tensor all = empty({size_ * n}, TensorOptions(kInt64).with_device(device_));
      gather_into(mine, all);
      return all.to_vector<int64_t>();
    });
  }

  int rank_;
  int size_;
  Device device_;
  cudaStream_t compute_;           // ember's stream of device_
  cudaStream_t stream_ = nullptr;  // the collectives' own
  ncclComm_t comm_ = nullptr;
};

// What rank 0 sends the others (Note [Starting an NCCL group]).
struct StartMessage {
  ncclResult_t result = ncclSuccess;
  ncclUniqueId id{};
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::optional<LaunchInfo>& launch) {
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
  check_nccl(message.result, where.rank == 0 ? "ncclGetUniqueId" : "ncclGetUniqueId on rank 0", nullptr);
  return std::make_shared<NcclProcessGroup>(where.rank, where.size, where.local_rank, message.id);
}

}  // namespace ember::distributed
