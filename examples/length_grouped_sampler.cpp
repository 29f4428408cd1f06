#include "examples/length_grouped_sampler.h"

#include <algorithm>

#include "core/check.h"

namespace ember::examples {

LengthGroupedSampler::LengthGroupedSampler(std::vector<int64_t> lengths, int64_t batch_size, uint64_t seed)
    : lengths_(std::move(lengths)), batch_size_(batch_size), seed_(seed) {
  EMBER_CHECK(batch_size > 0, "[LengthGroupedSampler] batch_size must be positive, got ", batch_size);
}

std::vector<int64_t> LengthGroupedSampler::indices(int64_t n, int64_t epoch) const {
  EMBER_CHECK(n == static_cast<int64_t>(lengths_.size()), "[LengthGroupedSampler] has the lengths of ",
              lengths_.size(), " examples, asked to order ", n);
  const uint64_t key = data::epoch_shuffle_key(seed_, epoch);
  std::vector<int64_t> order = data::shuffled_indices(n, key);
  const int64_t pool = 50 * batch_size_;
  for (int64_t begin = 0; begin < n; begin += pool) {
    const auto first = order.begin() + begin, last = order.begin() + std::min(n, begin + pool);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return lengths_[static_cast<size_t>(a)] < lengths_[static_cast<size_t>(b)]; });
  }
  const int64_t full_batches = n / batch_size_;
  std::vector<int64_t> result;
  result.reserve(static_cast<size_t>(n));
  for (int64_t batch : data::shuffled_indices(full_batches, key + 1))
    result.insert(result.end(), order.begin() + batch * batch_size_, order.begin() + (batch + 1) * batch_size_);
  result.insert(result.end(), order.begin() + full_batches * batch_size_, order.end());
  return result;
}

}  // namespace ember::examples
