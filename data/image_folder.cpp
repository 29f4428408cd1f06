// ImageFolder: a directory scan at construction, decoding (image_decode.h) and our own resampling per get().
#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "data/image_decode.h"

namespace ember::data {

namespace fs = std::filesystem;

namespace {

bool is_image_file(const fs::directory_entry& entry) {
  if (!entry.is_regular_file()) return false;
  std::string ext = entry.path().extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

// The entries of `dir` that `keep` accepts, sorted by name so class indices and example order
// do not depend on the file system.
template <class Keep>
std::vector<fs::path> sorted_entries(const fs::path& dir, Keep keep) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir))
    if (keep(entry)) out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Bilinear sampling along one axis: output position o reads input positions i0 and i1 with
// weight w1 on i1. Half-pixel centers, source positions clamped at 0 (as PyTorch).
struct Tap {
  int64_t i0, i1;
  float w1;
};

std::vector<Tap> bilinear_taps(int64_t in, int64_t out) {
  std::vector<Tap> taps(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t o = 0; o < out; ++o) {
    const double src = std::max((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0);
    const int64_t i0 = std::min(static_cast<int64_t>(src), in - 1);
    taps[static_cast<size_t>(o)] = {i0, std::min(i0 + 1, in - 1), static_cast<float>(src - static_cast<double>(i0))};
  }
  return taps;
}

// stb's interleaved uint8 pixels [H, W, C] to a float32 image [C, OH, OW] in [0, 1]. At the same
// size every weight is 0 and a + 0 * (b - a) == a, so no resize gives exactly x / 255.
Tensor to_chw_float(const uint8_t* pixels, int64_t h, int64_t w, int64_t c, Pair size) {
  const auto [oh, ow] = size;
  const std::vector<Tap> ys = bilinear_taps(h, oh), xs = bilinear_taps(w, ow);
  Tensor out = empty({c, oh, ow});
  float* dst = out.data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    auto at = [&](int64_t y, int64_t x) { return static_cast<float>(pixels[(y * w + x) * c + ch]); };
    for (const Tap& ty : ys) {
      for (const Tap& tx : xs) {
        const float top = at(ty.i0, tx.i0) + tx.w1 * (at(ty.i0, tx.i1) - at(ty.i0, tx.i0));
        const float bottom = at(ty.i1, tx.i0) + tx.w1 * (at(ty.i1, tx.i1) - at(ty.i1, tx.i0));
        *dst++ = (top + ty.w1 * (bottom - top)) / 255.0f;
      }
    }
  }
  return out;
}

}  // namespace

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions options) : options_(options) {
  EMBER_CHECK(options_.channels_ == 1 || options_.channels_ == 3, "[ImageFolder] channels must be 1 or 3, got ",
              options_.channels_);
  if (options_.resize_)
    EMBER_CHECK((*options_.resize_)[0] > 0 && (*options_.resize_)[1] > 0, "[ImageFolder] resize to [",
                (*options_.resize_)[0], ", ", (*options_.resize_)[1], "] is not a positive size");
  EMBER_CHECK(fs::is_directory(root), "[ImageFolder] ", root,
              fs::exists(root) ? ": not a directory (the root holds one folder per class)" : ": no such directory");

  // Without a resize every image must match the first one: stacking a batch needs one shape.
  std::string first_file;
  if (options_.resize_) size_ = *options_.resize_;
  auto is_dir = [](const fs::directory_entry& e) { return e.is_directory(); };
  for (const fs::path& class_dir : sorted_entries(root, is_dir)) {
    const auto target = static_cast<int64_t>(classes_.size());
    classes_.push_back(class_dir.filename().string());
    const size_t before = files_.size();
    for (const fs::path& path : sorted_entries(class_dir, is_image_file)) {
      const std::string file = path.string();
      const ImageInfo info = probe_image(read_image_file(file), options_.channels_, file);
      const Pair size{info.height, info.width};
      if (!options_.resize_) {
        if (first_file.empty()) {
          first_file = file;
          size_ = size;
        }
        EMBER_CHECK(size_ == size, "[ImageFolder] ", file, " is ", size[0], "x", size[1], " (height x width) but ",
                    first_file, " is ", size_[0], "x", size_[1],
                    "; pass ImageFolderOptions().resize({h, w}) to use images of different sizes");
      }
      files_.push_back(file);
      targets_.push_back(target);
    }
    EMBER_CHECK(files_.size() > before, "[ImageFolder] class folder ", class_dir.string(),
                " holds no .png, .jpg, .jpeg or .bmp files");
  }
  EMBER_CHECK(!classes_.empty(), "[ImageFolder] ", root, " has no class sub-folders");
}

Example ImageFolder::get(int64_t index) const {
  check_index(index, "ImageFolder");
  const std::string& path = file(index);
  const DecodedImage image = decode_image(read_image_file(path), options_.channels_, path);
  return {to_chw_float(image.pixels.get(), image.height, image.width, image.channels, size_),
          scalar_tensor(static_cast<double>(target(index)), kInt64)};
}

}  // namespace ember::data
