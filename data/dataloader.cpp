#include "data/dataloader.h"

#include <omp.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/kernel_bodies/philox.h"
#include "core/memory_phase.h"

namespace ember::data {

namespace {

// Rounding up as examples / b plus one for a remainder: (examples + b - 1) / b would overflow
// for a batch size near INT64_MAX.
int64_t batches_per_epoch(int64_t examples, const DataLoaderOptions& options) {
  const int64_t b = options.batch_size_;
  return examples / b + (!options.drop_last_ && examples % b != 0 ? 1 : 0);
}

}  // namespace

// Note [DataLoader workers]
// An epoch is a fixed list of batches: batch k holds order[k * B, (k + 1) * B). Making batch k
// is a pure function of (data set, order, k, augmentation key) — Note [Deterministic
// augmentation] — so it does not matter which thread makes it, or when.
// With no workers, next() makes the due batch on the calling thread. With workers, each one
// claims the next batch number from a shared counter, makes the batch, and puts it in slot
// k % capacity of a ring; the consumer waits for slot consumed % capacity to fill, so batches
// come out in order whichever finishes first. A worker may only claim k < consumed + capacity:
// that bounds the batches made ahead (capacity = prefetch * workers, at most the epoch's batch
// count) and means the slot it will fill has already been emptied. Whatever a worker's batch
// throws (an ember::Error, std::bad_alloc, anything) is stored in its slot and rethrown
// unchanged by next() on the consumer's thread when that batch is due; nothing escapes a worker
// thread, which would terminate the program.
// Workers run with grad mode off (nothing they make needs a graph) and with one OpenMP thread:
// they are parallel with each other already, and an OpenMP team per worker would fight the
// training thread's team for the cores. Destroying the epoch stops the workers: each finishes
// the batch in hand and exits.
class DataLoader::Epoch {
 public:
  Epoch(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options, int64_t epoch);
  ~Epoch();
  Epoch(const Epoch&) = delete;
  Epoch& operator=(const Epoch&) = delete;

  // The next batch in order, or nothing at the end of the epoch.
  std::optional<Batch> next();

 private:
  struct Slot {
    Batch batch;
    std::exception_ptr error;
    bool full = false;
  };

  Batch make_batch(int64_t k) const;
  void work();
  void stop();

  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const Transform> transform_;
  int64_t batch_size_;
  std::vector<int64_t> order_;
  int64_t num_batches_;
  uint64_t augment_key_;

  std::mutex mutex_;
  std::condition_variable slot_filled_, slot_freed_;
  std::vector<Slot> slots_;  // the ring; changed under mutex_, like the counters below
  int64_t claimed_ = 0;      // batches handed to workers
  int64_t consumed_ = 0;     // batches returned by next() (only the consumer writes it)
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

DataLoader::Epoch::Epoch(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options, int64_t epoch)
    : dataset_(std::move(dataset)), transform_(options.transform_), batch_size_(options.batch_size_) {
  // The epoch's two keys, both from one Philox block of (seed, epoch): one orders, one augments.
  const philox::Block keys = philox::generate(options.seed_, static_cast<uint64_t>(epoch));
  augment_key_ = (uint64_t{keys.v[2]} << 32) | keys.v[3];

  const int64_t n = dataset_->size();
  if (options.sampler_) {
    order_ = options.sampler_->indices(n, epoch);
    for (int64_t index : order_)
      EMBER_CHECK(index >= 0 && index < n, "[DataLoader] the sampler gave index ", index, " for a data set of ", n,
                  " examples");
  } else if (options.shuffle_) {
    order_ = shuffled_indices(n, epoch_shuffle_key(options.seed_, epoch));
  } else {
    order_.resize(static_cast<size_t>(n));
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }
  num_batches_ = batches_per_epoch(static_cast<int64_t>(order_.size()), options);

  // More workers than batches, or a ring longer than the epoch, would only sit idle; capping
  // both keeps a huge num_workers or prefetch from starting threads or allocating slots for nothing.
  const int64_t num_workers = std::min<int64_t>(options.num_workers_, num_batches_);
  slots_.resize(static_cast<size_t>(std::min(int64_t{options.prefetch_} * num_workers, num_batches_)));
  try {
    for (int64_t w = 0; w < num_workers; ++w) workers_.emplace_back([this] { work(); });
  } catch (...) {  // could not start a thread: stop the ones running before giving up
    stop();
    throw;
  }
}

DataLoader::Epoch::~Epoch() { stop(); }

void DataLoader::Epoch::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  slot_freed_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

Batch DataLoader::Epoch::make_batch(int64_t k) const {
  NoGradGuard no_grad;
  const memory::PhaseGuard phase("data loading");
  const int64_t begin = k * batch_size_;  // below the example count, so it does not overflow
  const int64_t count = std::min(batch_size_, static_cast<int64_t>(order_.size()) - begin);
  const std::span<const int64_t> indices(order_.data() + begin, static_cast<size_t>(count));
  Batch batch = dataset_->get_batch(indices);
  if (transform_) {
    std::vector<RandomStream> streams;
    streams.reserve(indices.size());
    for (int64_t i : indices) streams.emplace_back(augment_key_, static_cast<uint64_t>(i));
    batch.data = transform_->apply(std::move(batch.data), streams);
  }
  return batch;
}

void DataLoader::Epoch::work() {
  omp_set_num_threads(1);  // this thread's OpenMP setting only
  const auto capacity = static_cast<int64_t>(slots_.size());
  for (;;) {
    int64_t k = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      slot_freed_.wait(lock, [&] { return stopping_ || claimed_ == num_batches_ || claimed_ < consumed_ + capacity; });
      if (stopping_ || claimed_ == num_batches_) return;
      k = claimed_++;
    }
    Slot made;
    try {
      made.batch = make_batch(k);
    } catch (...) {
      made.error = std::current_exception();
    }
    made.full = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_[static_cast<size_t>(k % capacity)] = std::move(made);
    }
    slot_filled_.notify_one();
  }
}

std::optional<Batch> DataLoader::Epoch::next() {
  if (consumed_ == num_batches_) return std::nullopt;
  if (workers_.empty()) return make_batch(consumed_++);
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    Slot& due = slots_[static_cast<size_t>(consumed_ % static_cast<int64_t>(slots_.size()))];
    slot_filled_.wait(lock, [&] { return due.full; });
    slot = std::exchange(due, Slot{});
    ++consumed_;
  }
  slot_freed_.notify_one();
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.batch);
}

DataLoader::Iterator::Iterator(std::shared_ptr<Epoch> epoch) : epoch_(std::move(epoch)) { ++*this; }

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  std::optional<Batch> next = epoch_->next();
  done_ = !next;
  batch_ = next ? std::move(*next) : Batch{};
  return *this;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  EMBER_CHECK(dataset_ != nullptr, "[DataLoader] got a null data set");
  EMBER_CHECK(options_.batch_size_ >= 1, "[DataLoader] batch_size must be positive, got ", options_.batch_size_);
  EMBER_CHECK(options_.num_workers_ >= 0, "[DataLoader] num_workers must not be negative, got ",
              options_.num_workers_);
  EMBER_CHECK(options_.prefetch_ >= 1, "[DataLoader] prefetch must be positive, got ", options_.prefetch_);
  EMBER_CHECK(!(options_.sampler_ && options_.shuffle_), "[DataLoader] shuffle and a sampler both set the order: "
              "leave shuffle off and let the sampler shuffle");
}

DataLoader::Iterator DataLoader::begin() { return Iterator(std::make_shared<Epoch>(dataset_, options_, epoch_++)); }

int64_t DataLoader::size() const {
  const int64_t n = dataset_->size();
  return batches_per_epoch(options_.sampler_ ? options_.sampler_->length(n) : n, options_);
}

int64_t DataLoader::batches_ahead() const {
  return std::min<int64_t>(int64_t{options_.prefetch_} * options_.num_workers_, size());
}

}  // namespace ember::data
