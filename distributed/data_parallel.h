#pragma once
// Note [DistributedDataParallel]
// Every rank holds the whole model and trains it on its own part of each batch; after backward
// every rank must hold the same gradient, the average of all ranks' gradients, so the same
// optimizer step keeps the replicas identical. DistributedDataParallel wraps the model and:
//  1. at construction checks that every rank has the same parameters (count, names, dtypes,
//     shapes; Note [Ranks that must agree]),
//     copies rank 0's parameters and buffers to all ranks, and packs the parameters into
//     buckets (Note [Gradient buckets]);
//  2. in backward, a hook on each parameter (Tensor::register_hook, Note [Tensor hooks]) copies
//     its gradient into its bucket as soon as the engine has it complete; when a bucket's last
//     gradient arrives the bucket is launched as a non-blocking allreduce, and buckets are
//     launched in plan order, so the ranks start the same collectives in the same order;
//  3. at the end of that backward (autograd::queue_callback, Note [End-of-backward
//     callbacks]) it waits for every bucket and writes the averaged gradients into .grad, so
//     when backward() returns .grad holds the same values on every rank.
// What is averaged is .grad itself: the gradient of this backward plus what earlier backwards
// under no_sync() accumulated locally. The average is over ranks (sum / size), so with a loss
// that is the mean over each rank's batch, the result is the gradient of the mean over the
// global batch: 2 ranks at batch 64 step like 1 process at batch 128.
// Activation checkpointing needs nothing special: a recompute regenerates saved tensors and
// never runs the parameters' gradient sinks, so each hook fires once per backward; a forward
// that is itself being recomputed (autograd::is_recomputing) skips the buffer broadcast.
// A parameter that got no gradient in a backward would leave its bucket unlaunched for ever:
// by default that backward ends with an Error naming the parameters; with
// find_unused_parameters they count as a zero gradient from this rank.
// Uneven inputs (one rank runs out of batches, or stops calling backward) are not evened out as
// PyTorch's join() does: the other ranks' bucket waits end after the group's timeout with an
// Error naming the step, the bucket and the rank that did not arrive (Note [Collective
// timeouts]). A rank with fewer batches is a bug in how the data was split (DistributedSampler
// gives every rank the same number), and shadowing its missing steps would hide it.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd/hook_handle.h"
#include "core/scoped_value.h"
#include "distributed/buckets.h"
#include "distributed/process_group.h"
#include "nn/module.h"

namespace ember::distributed {

struct DataParallelOptions {
  size_t bucket_cap_bytes = kDefaultBucketCapBytes;
  // Parameters that get no gradient in a backward (a branch not taken) contribute zeros instead
  // of failing that backward. A parameter no rank used ends with a zero .grad.
  bool find_unused_parameters = false;
  // Copy rank 0's buffers (BatchNorm's running statistics) to every rank at each training
  // forward, so evaluation and checkpoints see rank 0's (docs/decisions.md: local statistics).
  bool broadcast_buffers = true;
};

// When one bucket of the last synchronised backward was launched and found finished, on the
// steady clock (for the timeline in docs/distributed.md; no effect on training).
struct BucketTiming {
  std::chrono::steady_clock::time_point launched, finished;
};
struct BackwardTimeline {
  std::vector<BucketTiming> buckets;                // in plan order
  std::chrono::steady_clock::time_point end_of_backward;  // the engine ran its last node
  std::chrono::steady_clock::time_point reduced;    // .grad holds the averages
};

class DistributedDataParallel : public nn::Module {
 public:
  DistributedDataParallel(nn::Module& module, std::shared_ptr<ProcessGroup> group,
                          const DataParallelOptions& options = {});
  ~DistributedDataParallel() override;

  // Broadcasts the buffers (DataParallelOptions::broadcast_buffers), then runs the module.
  Tensor forward(const Tensor& x) override;
  // What forward does before running the module, for a program that runs the module's parts
  // itself (a checkpointed forward): the gradient hooks need nothing from forward.
  void sync_buffers();
  nn::Module& module() { return module_; }
  ProcessGroup& group() { return *group_; }

  // While the returned guard lives, backward leaves the gradients local (accumulating in .grad);
  // the first backward after it averages everything accumulated. For gradient accumulation:
  //   { auto local = ddp.no_sync(); loss(micro_batch_1).backward(); }
  //   loss(micro_batch_2).backward();  // averages the sum of both
  class NoSync : ScopedValue<bool> {
   public:
    explicit NoSync(bool& sync) : ScopedValue(sync, false) {}
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(sync_); }

  const std::vector<BucketPlan>& buckets() const { return plan_; }
  const BackwardTimeline& last_timeline() const { return timeline_; }

 private:
  struct Bucket {
    Tensor flat;                  // the gradients, packed as the plan says
    int pending = 0;              // gradients still to arrive in this backward
    std::unique_ptr<Work> work;   // the reduction, once launched
  };
  struct Where {
    size_t bucket = 0;
    size_t slot = 0;
  };

  void check_same_model_on_all_ranks();
  void broadcast_from_rank0(const std::vector<std::pair<std::string, Tensor>>& tensors);
  void on_gradient(size_t parameter, const Tensor& grad);
  void launch_ready_buckets();
  void poll_launched_buckets();
  void finish_backward();
  void reset_for_next_backward();

  nn::Module& module_;
  std::shared_ptr<ProcessGroup> group_;
  DataParallelOptions options_;
  std::vector<std::pair<std::string, Tensor>> parameters_;  // those that require grad
  std::vector<BucketPlan> plan_;
  std::vector<Bucket> buckets_;
  std::vector<Where> where_;     // per parameter
  std::vector<bool> ready_;      // per parameter, in this backward
  size_t next_launch_ = 0;       // buckets are launched in plan order
  bool finish_queued_ = false;   // this backward's end-of-backward callback
  bool sync_ = true;             // false under no_sync()
  int64_t synchronised_backwards_ = 0;  // for messages: which step a bucket's wait failed in
  std::vector<autograd::HookHandle> hooks_;
  BackwardTimeline timeline_;
};

}  // namespace ember::distributed
