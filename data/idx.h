#pragma once
// MNIST-style data sets, read from IDX files: 4 magic bytes (0, 0, element type, number of
// dims), the dims as big-endian uint32, then the elements row-major. Files may be gzipped or
// plain (zlib reads both). Each file is decoded once, whole, into one uint8 tensor; examples
// and batches are converted to float32 from it on demand (Note [Datasets and batches]).
#include <string>

#include "data/dataset.h"

namespace ember::data {

// Reads an IDX file of unsigned bytes into a uint8 tensor shaped as its header says. Throws
// naming the file when it is missing, not IDX, truncated, corrupt, or longer than declared.
Tensor read_idx(const std::string& path);

// Images [N, H, W] with labels [N] in [0, num_classes): the files
// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz of a directory. Examples are float32 images
// [1, H, W] scaled to [0, 1] (like torchvision's ToTensor) with int64 scalar targets.
class IdxDataset : public Dataset {
 public:
  int64_t size() const override { return labels_.size(0); }
  Example get(int64_t index) const override;
  Batch get_batch(std::span<const int64_t> indices) const override;

  const Tensor& images() const { return images_; }  // uint8 [N, H, W]
  const Tensor& labels() const { return labels_; }  // int64 [N]
  const std::string& directory() const { return dir_; }

 protected:
  // name: the data set's name for messages; dir: the directory holding the files.
  IdxDataset(const char* name, std::string dir, bool train, int64_t num_classes);

 private:
  const char* name_;
  std::string dir_;
  Tensor images_, labels_;
};

// The directory of a data set: `root` when given, else $EMBER_DATA/<subdir> when EMBER_DATA is
// set, else /usr/share/datasets/<subdir> (where Debian's dataset-* packages put them).
std::string dataset_directory(const std::string& root, const char* subdir);

// Zalando's Fashion-MNIST: 60000 training and 10000 test images of 28x28 clothes, 10 classes.
// Default directory: dataset_directory(root, "fashion-mnist").
class FashionMNIST : public IdxDataset {
 public:
  explicit FashionMNIST(const std::string& root = "", bool train = true);
};

// LeCun's MNIST digits, the same format. Default directory: dataset_directory(root, "mnist").
class MNIST : public IdxDataset {
 public:
  explicit MNIST(const std::string& root = "", bool train = true);
};

}  // namespace ember::data
