#include "distributed/mpi_process_group.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops.h"
#include "distributed/collective_check.h"
#include "distributed/collective_watch.h"
#include "distributed/mpi_runtime.h"

namespace ember::distributed {

namespace {

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::BFloat16:
    case DType::Float16: break;  // MPI has no 16-bit float type to sum
  }
  EMBER_FAIL("[distributed] the MPI backend has no ", dtype_name(dtype),
             " type; communicate float32 tensors (the NCCL backend takes 16-bit floats)");
}

int mpi_count(const Tensor& t, const char* op) {
  EMBER_CHECK(t.numel() <= INT32_MAX, "[", op, "] a tensor of ", t.numel(), " elements is more than one MPI call sends");
  return static_cast<int>(t.numel());
}

void check_tensor(const Tensor& t, const char* op) {
  EMBER_CHECK(t.defined(), "[", op, "] got an undefined tensor");
  EMBER_CHECK(t.device().is_cpu(), "[", op, "] the MPI backend works on CPU tensors; got a tensor on ", t.device(),
              " (CUDA tensors need the NCCL backend)");
}

void finish_average(const Tensor& t, ReduceOp op, int size) {
  if (op == ReduceOp::Avg) t.mul_(1.0 / size);
}

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<CollectiveWatch> watch, CollectiveCall call, MPI_Request request, Tensor tensor, ReduceOp op,
          std::chrono::milliseconds timeout)
      : watch_(std::move(watch)), call_(call), request_(request), tensor_(std::move(tensor)), op_(op),
        timeout_(timeout) {}
  ~MpiWork() override {
    // A collective cannot be abandoned while MPI may still write the buffer: wait for it (up to
    // the timeout; a timed-out one is kept alive by the watch), or, on a group that is already
    // broken, keep the buffer for the rest of the process (Note [Collective timeouts]). A
    // destructor must not throw: a failure here was the collective's.
    if (done_ || mpi_finalised()) return;
    if (watch_->broken()) {
      keep_until_exit({tensor_});
      return;
    }
    try {
      watch_->wait_quietly(mpi_request_finished(request_), call_, timeout_, {tensor_});
    } catch (const Error&) {
    }
  }
  bool test() override {
    if (!done_ && mpi_request_finished(request_)()) finish();
    return done_;
  }
  void wait() override {
    if (done_) return;
    watch_->wait(mpi_request_finished(request_), call_, timeout_, {tensor_});
    finish();
  }

 private:
  void finish() {
    done_ = true;
    finish_average(tensor_, op_, watch_->size());
  }
  std::shared_ptr<CollectiveWatch> watch_;
  CollectiveCall call_;
  MPI_Request request_;
  Tensor tensor_;
  ReduceOp op_;
  std::chrono::milliseconds timeout_;
  bool done_ = false;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup() {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    int rank = 0, size = 1;
    check_mpi(MPI_Comm_rank(comm_, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size), "MPI_Comm_size");
    watch_ = std::make_shared<CollectiveWatch>(rank, size, "the MPI job is aborted when this process exits");
  }
  ~MpiProcessGroup() override {
    // Freeing a communicator with a collective still in it (after a timeout) is not allowed.
    if (!watch_->broken() && !mpi_finalised()) MPI_Comm_free(&comm_);
  }
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

  int rank() const override { return watch_->rank(); }
  int size() const override { return watch_->size(); }
  Backend backend() const override { return Backend::MPI; }
  Device device() const override { return kCPU; }

  void allreduce(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce");
    check_reduce_op(tensor, op, "allreduce");
    const CollectiveCall call = check_same_call(Collective::Allreduce, tensor, 0);
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      MPI_Request request;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw_data(), mpi_count(buffer, "allreduce"), mpi_type(buffer.dtype()),
                               MPI_SUM, comm(), &request),
                "MPI_Iallreduce");
      watch_->wait(mpi_request_finished(request), call, timeout(), {buffer});
      finish_average(buffer, op, size());
    });
  }

  std::unique_ptr<Work> allreduce_async(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce_async");
    check_reduce_op(tensor, op, "allreduce_async");
    EMBER_CHECK(tensor.is_contiguous(), "[allreduce_async] the tensor must be contiguous (the result lands in it)");
    const CollectiveCall call = watch_->begin("allreduce_async");
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, tensor.raw_data(), mpi_count(tensor, "allreduce_async"),
                             mpi_type(tensor.dtype()), MPI_SUM, comm(), &request),
              "MPI_Iallreduce");
    return std::make_unique<MpiWork>(watch_, call, request, tensor, op, timeout());
  }

  void broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    const CollectiveCall call = check_same_call(Collective::Broadcast, tensor, root);
    check_root(root, size(), "broadcast");
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      MPI_Request request;
      check_mpi(MPI_Ibcast(buffer.raw_data(), mpi_count(buffer, "broadcast"), mpi_type(buffer.dtype()), root, comm(),
                           &request),
                "MPI_Ibcast");
      watch_->wait(mpi_request_finished(request), call, timeout(), {buffer});
    });
  }

  Tensor allgather(const Tensor& tensor) override {
    check_tensor(tensor, "allgather");
    const CollectiveCall call = check_same_call(Collective::Allgather, tensor, 0);
    const Tensor mine = tensor.contiguous();
    Shape shape = tensor.shape();
    shape.insert(shape.begin(), size());
    Tensor all = empty(shape, TensorOptions(tensor.dtype()));
    const int count = mpi_count(mine, "allgather");
    MPI_Request request;
    check_mpi(MPI_Iallgather(mine.raw_data(), count, mpi_type(mine.dtype()), all.raw_data(), count,
                             mpi_type(mine.dtype()), comm(), &request),
              "MPI_Iallgather");
    // Both buffers stay alive if it is abandoned: MPI may still read one and write the other.
    watch_->wait(mpi_request_finished(request), call, timeout(), {mine, all});
    return all;
  }

  void barrier() override {
    const CollectiveCall call = watch_->begin("barrier");
    MPI_Request request;
    check_mpi(MPI_Ibarrier(comm(), &request), "MPI_Ibarrier");
    watch_->wait(mpi_request_finished(request), call, timeout(), {});
  }

 private:
  MPI_Comm comm() const { return comm_; }

  // Numbers the collective, then the header exchange (Note [Process groups]), itself bounded by
  // the timeout: a rank that never arrives is found here, before any data moves.
  CollectiveCall check_same_call(Collective collective, const Tensor& tensor, int root) {
    const CollectiveCall call = watch_->begin(collective_name(collective));
    check_same_call_on_all_ranks(collective, tensor, root, size(), [&](const std::vector<int64_t>& words) {
      // Tensors, not vectors: an abandoned exchange keeps its buffers alive.
      const auto count = static_cast<int64_t>(words.size());
      Tensor mine = empty({count}, TensorOptions(kInt64)), all = empty({size() * count}, TensorOptions(kInt64));
      std::copy(words.begin(), words.end(), mine.data<int64_t>());
      MPI_Request request;
      check_mpi(MPI_Iallgather(mine.raw_data(), static_cast<int>(count), MPI_INT64_T, all.raw_data(),
                               static_cast<int>(count), MPI_INT64_T, comm(), &request),
                "MPI_Iallgather");
      watch_->wait(mpi_request_finished(request), call, timeout(), {mine, all});
      return std::vector<int64_t>(all.data<int64_t>(), all.data<int64_t>() + all.numel());
    });
    return call;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;  // the collectives'; the watch has its own for the arrivals
  std::shared_ptr<CollectiveWatch> watch_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_process_group(const std::optional<LaunchInfo>& launch) {
  ensure_mpi(launch);
  return std::make_shared<MpiProcessGroup>();
}

}  // namespace ember::distributed
