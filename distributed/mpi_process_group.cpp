#include "distributed/mpi_process_group.h"

#include <mpi.h>

#include <string>

#include "core/check.h"
#include "core/ops.h"
#include "distributed/collective_check.h"
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
  MpiWork(MPI_Request request, Tensor tensor, ReduceOp op, int size)
      : request_(request), tensor_(std::move(tensor)), op_(op), size_(size) {}
  ~MpiWork() override {
    // A collective cannot be abandoned: wait for it, so the buffer outlives MPI's use of it.
    if (!done_ && !mpi_finalised()) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) finish();
    return done_;
  }
  void wait() override {
    if (done_) return;
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
    finish();
  }

 private:
  void finish() {
    done_ = true;
    finish_average(tensor_, op_, size_);
  }
  MPI_Request request_;
  Tensor tensor_;
  ReduceOp op_;
  int size_;
  bool done_ = false;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup() {
    // A communicator of its own, so this group's collectives never match another group's.
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiProcessGroup() override {
    if (!mpi_finalised()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::MPI; }
  Device device() const override { return kCPU; }

  void allreduce(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce");
    check_reduce_op(tensor, op, "allreduce");
    check_same_call(Collective::Allreduce, tensor, 0);
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, buffer.raw_data(), mpi_count(buffer, "allreduce"), mpi_type(buffer.dtype()),
                              MPI_SUM, comm_),
                "MPI_Allreduce");
      finish_average(buffer, op, size_);
    });
  }

  std::unique_ptr<Work> allreduce_async(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce_async");
    check_reduce_op(tensor, op, "allreduce_async");
    EMBER_CHECK(tensor.is_contiguous(), "[allreduce_async] the tensor must be contiguous (the result lands in it)");
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, tensor.raw_data(), mpi_count(tensor, "allreduce_async"),
                             mpi_type(tensor.dtype()), MPI_SUM, comm_, &request),
              "MPI_Iallreduce");
    return std::make_unique<MpiWork>(request, tensor, op, size_);
  }

  void broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    check_same_call(Collective::Broadcast, tensor, root);
    check_root(root, size_, "broadcast");
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      check_mpi(MPI_Bcast(buffer.raw_data(), mpi_count(buffer, "broadcast"), mpi_type(buffer.dtype()), root, comm_),
                "MPI_Bcast");
    });
  }

  Tensor allgather(const Tensor& tensor) override {
    check_tensor(tensor, "allgather");
    check_same_call(Collective::Allgather, tensor, 0);
    const Tensor mine = tensor.contiguous();
    Shape shape = tensor.shape();
    shape.insert(shape.begin(), size_);
    Tensor all = empty(shape, TensorOptions(tensor.dtype()));
    const int count = mpi_count(mine, "allgather");
    check_mpi(MPI_Allgather(mine.raw_data(), count, mpi_type(mine.dtype()), all.raw_data(), count,
                            mpi_type(mine.dtype()), comm_),
              "MPI_Allgather");
    return all;
  }

  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  void check_same_call(Collective collective, const Tensor& tensor, int root) {
    check_same_call_on_all_ranks(collective, tensor, root, size_, [this](const std::vector<int64_t>& words) {
      std::vector<int64_t> all(words.size() * static_cast<size_t>(size_));
      check_mpi(MPI_Allgather(words.data(), static_cast<int>(words.size()), MPI_INT64_T, all.data(),
                              static_cast<int>(words.size()), MPI_INT64_T, comm_),
                "MPI_Allgather");
      return all;
    });
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_process_group(const std::optional<LaunchInfo>& launch) {
  ensure_mpi(launch);
  return std::make_shared<MpiProcessGroup>();
}

}  // namespace ember::distributed
