#include "distributed/mpi_process_group.h"

#include <mpi.h>

#include <chrono>
#include <future>
#include <string>

#include "core/check.h"
#include "core/ops.h"
#include "distributed/collective_check.h"
#include "distributed/comm_thread.h"

namespace ember::distributed {

namespace {

// Turns an MPI return code into an Error naming the call (the communicators use
// MPI_ERRORS_RETURN, so MPI reports failures instead of aborting the process).
void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  EMBER_FAIL("[distributed] ", call, " failed: ", std::string(text, static_cast<size_t>(length)));
}

// MPI lives once per process: initialised on first use, finalised when the program exits
// (the static below is destroyed then). Collectives run on each group's communication thread,
// set-up and tear-down on the thread that creates and destroys the group, never two at once
// (MPI_THREAD_SERIALIZED; Note [The communication thread]).
struct MpiRuntime {
  bool initialised_here = false;
  MpiRuntime() {
    int initialised = 0;
    check_mpi(MPI_Initialized(&initialised), "MPI_Initialized");
    if (initialised) return;
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    initialised_here = true;
    EMBER_CHECK(provided >= MPI_THREAD_SERIALIZED, "[init_process_group] this MPI provides thread level ", provided,
                ", below MPI_THREAD_SERIALIZED, which the communication thread needs");
  }
  ~MpiRuntime() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (initialised_here && !finalised) MPI_Finalize();
  }
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
};

void ensure_mpi() { static MpiRuntime runtime; }

bool mpi_finalised() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  return finalised != 0;
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
  }
  EMBER_FAIL("[distributed] unknown dtype");
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

// Average = sum / size, for floating tensors only (an integer average would round).
void check_reduce_op(const Tensor& t, ReduceOp op, const char* api) {
  EMBER_CHECK(op == ReduceOp::Sum || is_floating(t.dtype()), "[", api, "] ReduceOp::Avg needs a floating tensor; got ",
              t.dtype());
}

void finish_average(const Tensor& t, ReduceOp op, int size) {
  if (op == ReduceOp::Avg) t.mul_(1.0 / size);
}

// A reduction queued on the communication thread: done when its task has run there.
class MpiWork final : public Work {
 public:
  MpiWork(std::shared_future<void> reduced, Tensor tensor, ReduceOp op, int size)
      : reduced_(std::move(reduced)), tensor_(std::move(tensor)), op_(op), size_(size) {}
  // The task holds the buffer's address: it must have run before the tensor may go.
  ~MpiWork() override { reduced_.wait(); }
  bool test() override {
    if (!done_ && reduced_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) finish();
    return done_;
  }
  void wait() override {
    if (!done_) finish();
  }

 private:
  void finish() {
    reduced_.get();  // rethrows the task's Error
    done_ = true;
    finish_average(tensor_, op_, size_);
  }
  std::shared_future<void> reduced_;
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
    comm_thread_.reset();  // runs what is queued first
    if (!mpi_finalised()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::MPI; }

  void allreduce(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce");
    check_reduce_op(tensor, op, "allreduce");
    check_same_call(Collective::Allreduce, tensor, 0);
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      comm_thread_->run(reduce_task(buffer, "allreduce"));
      finish_average(buffer, op, size_);
    });
  }

  std::unique_ptr<Work> allreduce_async(const Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "allreduce_async");
    check_reduce_op(tensor, op, "allreduce_async");
    EMBER_CHECK(tensor.is_contiguous(), "[allreduce_async] the tensor must be contiguous (the result lands in it)");
    return std::make_unique<MpiWork>(comm_thread_->submit(reduce_task(tensor, "allreduce_async")), tensor, op, size_);
  }

  void broadcast(const Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast");
    check_same_call(Collective::Broadcast, tensor, root);
    EMBER_CHECK(root >= 0 && root < size_, "[broadcast] root ", root, " is not a rank of this group of ", size_);
    in_place_on_contiguous(tensor, [&](const Tensor& buffer) {
      const int count = mpi_count(buffer, "broadcast");
      comm_thread_->run([this, data = buffer.raw_data(), count, type = mpi_type(buffer.dtype()), root] {
        check_mpi(MPI_Bcast(data, count, type, root, comm_), "MPI_Bcast");
      });
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
    comm_thread_->run([&] {
      check_mpi(MPI_Allgather(mine.raw_data(), count, mpi_type(mine.dtype()), all.raw_data(), count,
                              mpi_type(mine.dtype()), comm_),
                "MPI_Allgather");
    });
    return all;
  }

  void barrier() override {
    comm_thread_->run([this] { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); });
  }

 private:
  void check_same_call(Collective collective, const Tensor& tensor, int root) {
    check_same_call_on_all_ranks(collective, tensor, root, size_, [this](const std::vector<int64_t>& words) {
      std::vector<int64_t> all(words.size() * static_cast<size_t>(size_));
      comm_thread_->run([&] {
        check_mpi(MPI_Allgather(words.data(), static_cast<int>(words.size()), MPI_INT64_T, all.data(),
                                static_cast<int>(words.size()), MPI_INT64_T, comm_),
                  "MPI_Allgather");
      });
      return all;
    });
  }

  // The sum over the ranks into `buffer`'s memory, as a task for the communication thread. It
  // captures the address, not the tensor: the caller keeps the tensor alive until it has run.
  std::function<void()> reduce_task(const Tensor& buffer, const char* api) {
    return [this, data = buffer.raw_data(), count = mpi_count(buffer, api), type = mpi_type(buffer.dtype())] {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, count, type, MPI_SUM, comm_), "MPI_Allreduce");
    };
  }

  // Runs `collective` on tensor's memory, or on a contiguous copy that is copied back.
  template <class Collective>
  static void in_place_on_contiguous(const Tensor& tensor, Collective collective) {
    if (tensor.is_contiguous()) return collective(tensor);
    const Tensor buffer = tensor.contiguous();
    collective(buffer);
    tensor.copy_(buffer);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<CommThread> comm_thread_ = std::make_unique<CommThread>();
};

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_process_group(const std::optional<LaunchInfo>& launch) {
  ensure_mpi();
  auto group = std::make_shared<MpiProcessGroup>();
  if (launch)
    EMBER_CHECK(group->rank() == launch->rank && group->size() == launch->size, "[init_process_group] MPI says rank ",
                group->rank(), " of ", group->size(), " but the launcher set ", launch->variables, " to ", launch->rank,
                " of ", launch->size, ": was the program started by another MPI's launcher?");
  return group;
}

}  // namespace ember::distributed
