#include "data/dataset.h"

#include <vector>

#include "core/ops.h"

namespace ember::data {

Batch Dataset::get_batch(std::span<const int64_t> indices) const {
  EMBER_CHECK(!indices.empty(), "[Dataset::get_batch] expects at least one index");
  std::vector<Tensor> data, targets;
  data.reserve(indices.size());
  targets.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = get(i);
    data.push_back(std::move(e.data));
    targets.push_back(std::move(e.target));
  }
  return {stack(data), stack(targets)};
}

void Dataset::check_index(int64_t index, const char* dataset) const {
  EMBER_CHECK(index >= 0 && index < size(), "[", dataset, "] index ", index, " is out of range for ", size(),
              " examples");
}

TensorDataset::TensorDataset(Tensor data, Tensor targets) : data_(std::move(data)), targets_(std::move(targets)) {
  EMBER_CHECK(data_.defined() && targets_.defined(), "[TensorDataset] expects defined data and targets");
  EMBER_CHECK(data_.dim() >= 1 && targets_.dim() >= 1 && data_.size(0) == targets_.size(0),
              "[TensorDataset] data ", shape_str(data_.shape()), " and targets ", shape_str(targets_.shape()),
              " must have the same size in dim 0");
}

Example TensorDataset::get(int64_t index) const {
  check_index(index, "TensorDataset");
  return {data_.select(0, index), targets_.select(0, index)};
}

Batch TensorDataset::get_batch(std::span<const int64_t> indices) const {
  Tensor index = from_buffer(indices.data(), {static_cast<int64_t>(indices.size())}, kInt64, kInt64);
  return {index_select(data_, 0, index), index_select(targets_, 0, index)};
}

}  // namespace ember::data
