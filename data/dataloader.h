#pragma once
// DataLoader: batches of a Dataset, shuffled, augmented and prefetched by worker threads.
//
//   auto train = std::make_shared<data::FashionMNIST>();
//   data::DataLoader loader(train, data::DataLoaderOptions().batch_size(128).shuffle(true).seed(1)
//       .num_workers(2).transform(data::Compose(data::RandomCrop(28, 4), data::RandomHorizontalFlip())));
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (data::Batch& batch : loader) train_step(batch.data, batch.target);
//
// Each begin() starts the next epoch: a new permutation when shuffling, new augmentations, both
// a pure function of (seed, epoch) (Note [Deterministic augmentation]). Batches arrive in order
// whatever the number of workers (Note [DataLoader workers] in dataloader.cpp). An exception
// thrown while making a batch is rethrown by the iterator when that batch is due.
#include <concepts>
#include <cstdint>
#include <iterator>
#include <memory>

#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transforms.h"

namespace ember::data {

struct DataLoaderOptions {
  DataLoaderOptions& batch_size(int64_t b) { batch_size_ = b; return *this; }
  DataLoaderOptions& shuffle(bool s) { shuffle_ = s; return *this; }
  DataLoaderOptions& seed(uint64_t s) { seed_ = s; return *this; }
  // Drop the last batch when it would be smaller than batch_size.
  DataLoaderOptions& drop_last(bool d) { drop_last_ = d; return *this; }
  // Background threads making batches; 0 makes them on the iterating thread when they are due.
  DataLoaderOptions& num_workers(int n) { num_workers_ = n; return *this; }
  // Batches made ahead of the consumer, per worker.
  DataLoaderOptions& prefetch(int batches) { prefetch_ = batches; return *this; }
  // Applied to every batch's data after the data set built it.
  DataLoaderOptions& transform(std::shared_ptr<const Transform> t) { transform_ = std::move(t); return *this; }
  template <std::derived_from<Transform> T>
  DataLoaderOptions& transform(T t) { return transform(std::make_shared<T>(std::move(t))); }

  // Which examples each epoch visits, in which order (Note [Samplers]); replaces shuffle, which
  // must then be off (a DistributedSampler shuffles itself).
  DataLoaderOptions& sampler(std::shared_ptr<const Sampler> s) { sampler_ = std::move(s); return *this; }
  int64_t batch_size_ = 1;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  bool drop_last_ = false;
  int num_workers_ = 0;
  int prefetch_ = 2;
  std::shared_ptr<const Transform> transform_;
  std::shared_ptr<const Sampler> sampler_;
};

class DataLoader {
  class Epoch;  // one pass over the data: its order, its workers and their queue

 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;

    Batch& operator*() { return batch_; }
    Batch* operator->() { return &batch_; }
    Iterator& operator++();
    bool operator==(std::default_sentinel_t) const { return done_; }

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<Epoch> epoch);

    std::shared_ptr<Epoch> epoch_;  // shared so that the epoch outlives the loader if need be
    Batch batch_;
    bool done_ = false;
  };

  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

  // Starts the next epoch and returns its first batch.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

  int64_t size() const;  // batches per epoch
  // The most batches the workers hold ready ahead of the loop: prefetch per worker, at most an epoch's.
  int64_t batches_ahead() const;
  int64_t epoch() const { return epoch_; }  // the epoch the next begin() starts
  void set_epoch(int64_t epoch) { epoch_ = epoch; }  // e.g. to resume a run
  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
};

}  // namespace ember::data
