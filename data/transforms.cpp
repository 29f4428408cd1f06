#include "data/transforms.h"

#include <algorithm>

#include "core/autograd/grad_mode.h"

namespace ember::data {

namespace {

void check_images(const Tensor& images, std::span<RandomStream> streams, const char* op) {
  EMBER_CHECK(images.dtype() == kFloat32 && images.dim() == 4 && images.is_contiguous(), "[", op,
              "] expects contiguous float32 images [B, C, H, W], got ", images.dtype(), " ",
              shape_str(images.shape()));
  EMBER_CHECK(images.size(0) == static_cast<int64_t>(streams.size()), "[", op, "] got ", images.size(0),
              " images but ", streams.size(), " random streams");
}

}  // namespace

Tensor Transform::operator()(const Tensor& image, RandomStream& stream) const {
  EMBER_CHECK(image.dim() == 3, "[Transform] expects one image [C, H, W], got ", shape_str(image.shape()));
  NoGradGuard no_grad;
  return apply(image.unsqueeze(0).clone(), std::span<RandomStream>(&stream, 1)).squeeze(0);
}

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  EMBER_CHECK(!mean_.empty() && mean_.size() == std_.size(), "[Normalize] expects as many means as stds, got ",
              mean_.size(), " and ", std_.size());
  for (double s : std_) EMBER_CHECK(s != 0.0, "[Normalize] std must be nonzero");
}

Tensor Normalize::apply(Tensor images, std::span<RandomStream> streams) const {
  check_images(images, streams, "Normalize");
  const int64_t n = images.size(0), c = images.size(1), plane = images.size(2) * images.size(3);
  EMBER_CHECK(mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == c, "[Normalize] has ", mean_.size(),
              " means for images of ", c, " channels");
  float* x = images.data<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(ch);
      // float32 subtract-then-divide, as torchvision, so results agree bit for bit
      const auto mean = static_cast<float>(mean_[k]), std = static_cast<float>(std_[k]);
      float* p = x + (b * c + ch) * plane;
      for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - mean) / std;
    }
  }
  return images;
}

RandomCrop::RandomCrop(Pair size, int64_t padding) : size_(size), padding_(padding) {
  EMBER_CHECK(size_[0] > 0 && size_[1] > 0 && padding_ >= 0, "[RandomCrop] expects a positive size and a ",
              "non-negative padding, got size [", size_[0], ", ", size_[1], "] and padding ", padding_);
}

Tensor RandomCrop::apply(Tensor images, std::span<RandomStream> streams) const {
  check_images(images, streams, "RandomCrop");
  const int64_t n = images.size(0), c = images.size(1), h = images.size(2), w = images.size(3);
  const auto [oh, ow] = size_;
  const int64_t p = padding_;
  EMBER_CHECK(oh <= h + 2 * p && ow <= w + 2 * p, "[RandomCrop] a ", oh, "x", ow, " crop does not fit ", h, "x",
              w, " images padded by ", p);
  Tensor out = empty({n, c, oh, ow});
  const float* src = images.data<float>();
  float* dst = out.data<float>();
  for (int64_t b = 0; b < n; ++b) {
    // The window's corner in padded coordinates, then in input coordinates (negative = padding).
    const int64_t top = streams[static_cast<size_t>(b)].below(h + 2 * p - oh + 1) - p;
    const int64_t left = streams[static_cast<size_t>(b)].below(w + 2 * p - ow + 1) - p;
    // Output columns [lo, hi) come from the input; the rest are padding.
    const int64_t lo = std::clamp(-left, int64_t{0}, ow), hi = std::clamp(w - left, lo, ow);
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = src + (b * c + ch) * h * w;
      for (int64_t y = 0; y < oh; ++y, dst += ow) {
        const int64_t sy = top + y;
        if (sy < 0 || sy >= h) {
          std::fill(dst, dst + ow, 0.0f);
          continue;
        }
        std::fill(dst, dst + lo, 0.0f);
        std::copy(plane + sy * w + left + lo, plane + sy * w + left + hi, dst + lo);
        std::fill(dst + hi, dst + ow, 0.0f);
      }
    }
  }
  return out;
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  EMBER_CHECK(p_ >= 0.0 && p_ <= 1.0, "[RandomHorizontalFlip] p must be in [0, 1], got ", p_);
}

Tensor RandomHorizontalFlip::apply(Tensor images, std::span<RandomStream> streams) const {
  check_images(images, streams, "RandomHorizontalFlip");
  const int64_t n = images.size(0), rows = images.size(1) * images.size(2), w = images.size(3);
  float* x = images.data<float>();
  for (int64_t b = 0; b < n; ++b) {
    if (!(streams[static_cast<size_t>(b)].uniform() < p_)) continue;
    for (float* row = x + b * rows * w; row != x + (b + 1) * rows * w; row += w) std::reverse(row, row + w);
  }
  return images;
}

Compose::Compose(std::vector<std::shared_ptr<const Transform>> transforms) : transforms_(std::move(transforms)) {
  for (const auto& t : transforms_) EMBER_CHECK(t != nullptr, "[Compose] got a null transform");
}

Tensor Compose::apply(Tensor images, std::span<RandomStream> streams) const {
  for (const auto& t : transforms_) images = t->apply(std::move(images), streams);
  return images;
}

}  // namespace ember::data
