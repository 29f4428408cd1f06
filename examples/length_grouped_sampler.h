#pragma once
// A training order that puts texts of similar length into the same batch, so that a batch cut to
// its longest text carries little padding.
#include <cstdint>
#include <vector>

#include "data/sampler.h"

namespace ember::examples {

// Note [Batches of similar length]
// A transformer's step costs about what its longest sequence costs times the batch size, so a
// batch of texts drawn at random, cut to its longest (BertClassifier does), is mostly padding when
// lengths vary. Each epoch this sampler shuffles the data set (the DataLoader's shuffle for the
// same seed and epoch), cuts the order into pools of 50 batches, sorts each pool by length (ties
// in shuffled order), cuts the pools into batches and shuffles the order of the full batches
// (the short one, if any, stays last: the loader cuts batches from consecutive indices). Which
// texts share a batch changes from epoch to epoch, the order of the batches is random, and every
// text is visited once per epoch. The order is a pure function of (seed, epoch), so a resumed run
// sees the same batches (Note [Training checkpoints]). batch_size must be the loader's.
class LengthGroupedSampler final : public data::Sampler {
 public:
  LengthGroupedSampler(std::vector<int64_t> lengths, int64_t batch_size, uint64_t seed);
  std::vector<int64_t> indices(int64_t dataset_size, int64_t epoch) const override;
  int64_t length(int64_t dataset_size) const override { return dataset_size; }

 private:
  std::vector<int64_t> lengths_;
  int64_t batch_size_;
  uint64_t seed_;
};

}  // namespace ember::examples
