#include "data/sampler.h"

#include <numeric>
#include <optional>

#include "core/check.h"
#include "core/kernel_bodies/philox.h"
#include "core/shape.h"
#include "data/random_stream.h"

namespace ember::data {

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t key) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  RandomStream stream(key, 0);
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(stream.below(i + 1))]);
  return order;
}

uint64_t epoch_shuffle_key(uint64_t seed, int64_t epoch) {
  const philox::Block keys = philox::generate(seed, static_cast<uint64_t>(epoch));
  return (uint64_t{keys.v[0]} << 32) | keys.v[1];
}

DistributedSampler::DistributedSampler(int num_replicas, int rank, DistributedSamplerOptions options)
    : num_replicas_(num_replicas), rank_(rank), options_(options) {
  EMBER_CHECK(num_replicas >= 1, "[DistributedSampler] num_replicas must be >= 1, got ", num_replicas);
  EMBER_CHECK(rank >= 0 && rank < num_replicas, "[DistributedSampler] rank ", rank, " is not in [0, ", num_replicas,
              ")");
}

int64_t DistributedSampler::length(int64_t dataset_size) const {
  EMBER_CHECK(dataset_size >= 0, "[DistributedSampler] the data set size must not be negative, got ", dataset_size);
  const int64_t n = num_replicas_;
  // Rounding up as dataset_size / n plus one for a remainder: (size + n - 1) / n overflows near INT64_MAX.
  return options_.drop_last ? dataset_size / n : dataset_size / n + (dataset_size % n != 0 ? 1 : 0);
}

std::vector<int64_t> DistributedSampler::indices(int64_t dataset_size, int64_t epoch) const {
  EMBER_CHECK(dataset_size > 0 || options_.drop_last, "[DistributedSampler] the data set is empty");
  std::vector<int64_t> all;
  if (options_.shuffle) {
    all = shuffled_indices(dataset_size, epoch_shuffle_key(options_.seed, epoch));
  } else {
    all.resize(static_cast<size_t>(dataset_size));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  const std::optional<int64_t> padded = try_mul(length(dataset_size), num_replicas_);
  EMBER_CHECK(padded, "[DistributedSampler] a data set of ", dataset_size, " over ", num_replicas_,
              " replicas has more indices than int64 holds");
  const auto total = static_cast<size_t>(*padded);
  // Padding repeats the list from its start (more than once when it is shorter than the ranks).
  for (size_t i = all.size(); i < total; ++i) all.push_back(all[i % static_cast<size_t>(dataset_size)]);
  all.resize(total);
  std::vector<int64_t> mine;
  for (size_t i = static_cast<size_t>(rank_); i < total; i += static_cast<size_t>(num_replicas_)) mine.push_back(all[i]);
  return mine;
}

}  // namespace ember::data
