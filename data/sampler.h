#pragma once
// Note [Samplers]
// A Sampler decides which examples of a data set an epoch visits and in which order: a pure
// function of (data set size, epoch), so every worker, and every rank of a distributed run,
// computes the same answer without talking to the others. DataLoaderOptions::sampler replaces
// the loader's own order (all examples, shuffled or not); the loader's epoch counter is what the
// sampler sees, so DataLoader::set_epoch reshuffles it as PyTorch's sampler.set_epoch does.
#include <cstdint>
#include <vector>

namespace ember::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices the epoch visits, in order.
  virtual std::vector<int64_t> indices(int64_t dataset_size, int64_t epoch) const = 0;
  // How many that is (without building them).
  virtual int64_t length(int64_t dataset_size) const = 0;
};

// 0 .. n-1 in a random order that is a pure function of `key` (Fisher-Yates on a Philox stream;
// Note [Deterministic augmentation]).
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t key);
// The shuffle key of an epoch: the DataLoader's, and a DistributedSampler's with the same seed.
uint64_t epoch_shuffle_key(uint64_t seed, int64_t epoch);

// Note [Distributed sampling]
// Each of `num_replicas` ranks reads its own shard of the data: all ranks shuffle the whole
// data set the same way (shared seed, the epoch's key), make the list a multiple of the rank
// count, and rank r takes every num_replicas-th index starting at r. The shards are disjoint
// and, together, cover the data set once. With drop_last the list is cut to the multiple below
// (a few examples skipped this epoch); otherwise it is padded with its own first indices (a few
// seen twice). Either way every rank gets the same number, so every rank runs the same number
// of steps and none waits in a collective for a rank that has finished its epoch.
struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int num_replicas, int rank, DistributedSamplerOptions options = {});
  std::vector<int64_t> indices(int64_t dataset_size, int64_t epoch) const override;
  int64_t length(int64_t dataset_size) const override;

 private:
  int num_replicas_;
  int rank_;
  DistributedSamplerOptions options_;
};

}  // namespace ember::data
