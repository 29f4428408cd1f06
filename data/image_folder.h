#pragma once
// A folder of images with one sub-folder per class, like torchvision's ImageFolder:
//   root/cat/001.png, root/cat/002.png, root/dog/001.bmp, ...
// Classes are the sub-folders sorted by name (index = position); images are the .png, .jpg,
// .jpeg and .bmp files of each, sorted by name. Only PNG and BMP content is decoded, whatever
// the extension, and only images of at most kMaxImageValues values; JPEG files are refused with
// an error that says why (data/image_decode.h, Note [Untrusted images]). Every header is probed when the data set is
// built, so unreadable files, refused formats, empty or oversized images and mixed sizes are
// reported up front; pixels are decoded (stb_image) on each get(), which is what DataLoader
// workers parallelise.
#include <optional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/dataset.h"

namespace ember::data {

// ImageFolderOptions().channels(1).resize({32, 32})
struct ImageFolderOptions {
  ImageFolderOptions& channels(int c) { channels_ = c; return *this; }  // 1 (gray) or 3 (RGB)
  ImageFolderOptions& resize(Pair size) { resize_ = size; return *this; }  // {height, width}

  int channels_ = 3;
  std::optional<Pair> resize_;
};

// Examples are float32 images [C, H, W] in [0, 1] with int64 scalar class targets. Color
// conversion is stb_image's (gray from RGB by its integer luma weights). Resizing is bilinear
// with half-pixel centers and no antialiasing (PyTorch's interpolate(mode="bilinear",
// align_corners=False)). Without a resize every image must have the same size (checked when the
// data set is built; a file that changes size afterwards is resampled to it).
class ImageFolder : public Dataset {
 public:
  explicit ImageFolder(const std::string& root, ImageFolderOptions options = {});
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  Example get(int64_t index) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& file(int64_t index) const { return files_[static_cast<size_t>(index)]; }
  int64_t target(int64_t index) const { return targets_[static_cast<size_t>(index)]; }
  Pair image_size() const { return size_; }  // {height, width} of every example

 private:
  ImageFolderOptions options_;
  Pair size_{0, 0};
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int64_t> targets_;
};

}  // namespace ember::data
