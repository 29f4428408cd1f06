#include "data/subset.h"

namespace ember::data {

Subset::Subset(std::shared_ptr<const Dataset> dataset, int64_t size) : dataset_(std::move(dataset)), size_(size) {
  EMBER_CHECK(dataset_, "[Subset] the data set is null");
  EMBER_CHECK(size >= 0 && size <= dataset_->size(), "[Subset] cannot take ", size, " examples of a data set of ",
              dataset_->size());
}

Example Subset::get(int64_t index) const {
  check_index(index, "Subset");
  return dataset_->get(index);
}

Batch Subset::get_batch(std::span<const int64_t> indices) const {
  for (int64_t i : indices) check_index(i, "Subset");
  return dataset_->get_batch(indices);
}

}  // namespace ember::data
