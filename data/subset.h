#pragma once
#include <memory>

#include "data/dataset.h"

namespace ember::data {

// The first `size` examples of another data set (like torch.utils.data.Subset with
// range(size)); batches come from the underlying data set's own get_batch.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> dataset, int64_t size);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  Batch get_batch(std::span<const int64_t> indices) const override;

 private:
  std::shared_ptr<const Dataset> dataset_;
  int64_t size_;
};

}  // namespace ember::data
