#pragma once
// Note [Datasets and batches]
// A Dataset is random access: size() examples, get(i) returns one as {data, target}. A loader
// wants whole batches, and stacking get() results costs a tensor per example; so get_batch()
// is virtual too, and data sets held in one decoded buffer (Fashion-MNIST, TensorDataset)
// override it to allocate the batch once and copy rows into it. get() and get_batch() are
// const and must be safe to call from several threads at once: DataLoader workers share the
// data set.
#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace ember::data {

struct Example {
  Tensor data;
  Tensor target;
};

// data [B, ...] and target [B, ...]: the examples stacked along a new first dim.
struct Batch {
  Tensor data;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, stacked. The tensors returned are new (never views of the data
  // set), so the caller may change them in place: the DataLoader's transforms do.
  virtual Batch get_batch(std::span<const int64_t> indices) const;

 protected:
  // Throws naming `dataset` when index is not in [0, size()).
  void check_index(int64_t index, const char* dataset) const;
};

// Examples are the rows (dim 0) of `data` and `targets`, like torch.utils.data.TensorDataset.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);
  int64_t size() const override { return data_.size(0); }
  Example get(int64_t index) const override;
  Batch get_batch(std::span<const int64_t> indices) const override;

 private:
  Tensor data_, targets_;
};

}  // namespace ember::data
