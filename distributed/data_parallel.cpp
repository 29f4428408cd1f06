#include "distributed/data_parallel.h"

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/recompute.h"
#include "core/check.h"
#include "distributed/agreement.h"

namespace ember::distributed {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::pair<std::string, Tensor>> requiring_grad(std::vector<std::pair<std::string, Tensor>> named) {
  std::erase_if(named, [](const auto& entry) { return !entry.second.requires_grad(); });
  return named;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& module, std::shared_ptr<ProcessGroup> group,
                                                 const DataParallelOptions& options)
    : module_(module), group_(std::move(group)), options_(options) {
  EMBER_CHECK(group_, "[DistributedDataParallel] the process group is null");
  register_module("module", module_);
  parameters_ = requiring_grad(module_.named_parameters());
  for (const auto& [name, p] : module_.named_parameters())
    EMBER_CHECK(p.device() == group_->device(), "[DistributedDataParallel] parameter '", name, "' is on ", p.device(),
                " but the ", backend_name(group_->backend()), " group's collectives work on ", group_->device(),
                " tensors: move the model to the group's device() before wrapping it");
  check_same_model_on_all_ranks();
  {
    NoGradGuard no_grad;
    broadcast_from_rank0(module_.named_parameters());
    broadcast_from_rank0(module_.named_buffers());
  }

  std::vector<Tensor> tensors;
  for (const auto& [name, p] : parameters_) tensors.push_back(p);
  plan_ = plan_buckets(tensors, options_.bucket_cap_bytes);
  where_.resize(parameters_.size());
  for (size_t b = 0; b < plan_.size(); ++b) {
    buckets_.push_back(Bucket{zeros({plan_[b].numel}, TensorOptions(plan_[b].dtype).with_device(plan_[b].device)), 0, {}});
    for (size_t s = 0; s < plan_[b].slots.size(); ++s) where_[plan_[b].slots[s].parameter] = Where{b, s};
  }
  timeline_.buckets.resize(plan_.size());
  reset_for_next_backward();
  for (size_t i = 0; i < parameters_.size(); ++i)
    hooks_.push_back(parameters_[i].second.register_hook([this, i](const Tensor& grad) {
      on_gradient(i, grad);
      return Tensor();  // the gradient goes on into .grad unchanged; finish_backward overwrites it
    }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (autograd::HookHandle& h : hooks_) h.remove();
}

// The buckets of all ranks must line up, or their reductions would add unrelated numbers: the
// same parameters in the same order, each with the same name, dtype and shape (Note [Ranks that
// must agree]). Checked once, here, which is what lets the buckets use allreduce_async without a
// header exchange (Note [Process groups]).
void DistributedDataParallel::check_same_model_on_all_ranks() {
  Settings model{{"the number of parameters that require grad", std::to_string(parameters_.size())}};
  for (const auto& [name, p] : parameters_)
    model.emplace_back("parameter '" + name + "'", detail::concat(dtype_name(p.dtype()), " ", shape_str(p.shape())));
  check_ranks_agree(*group_, model, "[DistributedDataParallel]", "every rank must wrap the same model");
}

void DistributedDataParallel::broadcast_from_rank0(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [name, t] : tensors) group_->broadcast(t, 0);
}

void DistributedDataParallel::sync_buffers() {
  // A checkpointed DDP is recomputed in backward: the buffers were broadcast in its forward.
  if (!options_.broadcast_buffers || !is_training() || autograd::is_recomputing()) return;
  NoGradGuard no_grad;
  broadcast_from_rank0(module_.named_buffers());
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  sync_buffers();
  return module_(x);
}

void DistributedDataParallel::on_gradient(size_t parameter, const Tensor& grad) {
  if (!sync_) return;
  if (!finish_queued_) {
    autograd::queue_callback([this] { finish_backward(); });
    finish_queued_ = true;
  }
  const Where w = where_[parameter];
  const BucketSlot& slot = plan_[w.bucket].slots[w.slot];
  // The hook runs just before the engine adds `grad` into .grad (Note [Tensor hooks]); what is
  // averaged is .grad as it will be, including what no_sync() backwards left there.
  const Tensor& accumulated = parameters_[parameter].second.grad();
  const Tensor full_grad = accumulated.defined() ? accumulated + grad : grad;
  // copy_ reads a strided gradient (a transposed weight's) directly: no contiguous copy first.
  const Tensor& p = parameters_[parameter].second;
  buckets_[w.bucket].flat.narrow(0, slot.offset, slot.numel).view(p.shape()).copy_(full_grad);
  ready_[parameter] = true;
  --buckets_[w.bucket].pending;
  launch_ready_buckets();
  poll_launched_buckets();
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    timeline_.buckets[next_launch_].launched = Clock::now();
    b.work = group_->allreduce_async(b.flat, ReduceOp::Avg);
    ++next_launch_;
  }
}

// MPI advances a non-blocking collective only inside MPI calls (Note [Process groups]): each
// gradient that arrives gives the launched reductions a turn.
void DistributedDataParallel::poll_launched_buckets() {
  for (size_t b = 0; b < next_launch_; ++b)
    if (buckets_[b].work && buckets_[b].work->test()) {
      buckets_[b].work.reset();
      timeline_.buckets[b].finished = Clock::now();
    }
}

void DistributedDataParallel::finish_backward() {
  timeline_.end_of_backward = Clock::now();
  std::string unused;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (ready_[i]) continue;
    if (!options_.find_unused_parameters) {
      unused += (unused.empty() ? "" : ", ") + parameters_[i].first;
      continue;
    }
    const Where w = where_[i];
    const BucketSlot& slot = plan_[w.bucket].slots[w.slot];
    const Tensor& accumulated = parameters_[i].second.grad();
    const Tensor view = buckets_[w.bucket].flat.narrow(0, slot.offset, slot.numel).view(parameters_[i].second.shape());
    if (accumulated.defined()) view.copy_(accumulated);
    else view.zero_();
    ready_[i] = true;
    --buckets_[w.bucket].pending;
  }
  launch_ready_buckets();
  ++synchronised_backwards_;
  // Wait for what was launched even when failing: the buffers must outlive the reductions.
  for (size_t b = 0; b < next_launch_; ++b)
    if (buckets_[b].work) {
      try {
        buckets_[b].work->wait();
      } catch (const Error& e) {
        // The group gave up on the other ranks (Note [Collective timeouts]): it is unusable now.
        // Dropping the other buckets' Works hands their buffers to the process (Work's
        // destructor on a broken group), so the flat buffers outlive DDP if a rank joins later.
        for (Bucket& bucket : buckets_) bucket.work.reset();
        reset_for_next_backward();
        EMBER_FAIL("[DistributedDataParallel] synchronised backward #", synchronised_backwards_, ", bucket ", b,
                   " of ", buckets_.size(), ": ", e.message());
      }
      buckets_[b].work.reset();
      timeline_.buckets[b].finished = Clock::now();
    }
  const bool complete = next_launch_ == buckets_.size();
  if (complete)
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const Where w = where_[i];
      const BucketSlot& slot = plan_[w.bucket].slots[w.slot];
      const Tensor& p = parameters_[i].second;
      const Tensor average = buckets_[w.bucket].flat.narrow(0, slot.offset, slot.numel).view(p.shape());
      if (p.grad().defined()) p.grad().copy_(average);
      else p.set_grad(average.clone());
    }
  timeline_.reduced = Clock::now();
  reset_for_next_backward();
  EMBER_CHECK(complete, "[DistributedDataParallel] this backward computed no gradient for ", unused,
              ": every parameter that requires grad must get one in each backward (the ranks reduce them "
              "together), or construct DistributedDataParallel with find_unused_parameters = true");
}

void DistributedDataParallel::reset_for_next_backward() {
  for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].pending = static_cast<int>(plan_[b].slots.size());
  ready_.assign(parameters_.size(), false);
  next_launch_ = 0;
  finish_queued_ = false;
}

}  // namespace ember::distributed
