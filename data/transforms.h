#pragma once
// Image transforms for data loading: Normalize, RandomCrop, RandomHorizontalFlip, Compose.
// They work on a whole batch [B, C, H, W] at once — one allocation per batch at most and plain
// loops over rows, no per-pixel virtual calls — but randomness stays per image: image b draws
// from its own stream (Note [Deterministic augmentation]). Transforms are not differentiable.
#include <concepts>
#include <memory>
#include <span>
#include <vector>

#include "core/ops.h"
#include "data/random_stream.h"

namespace ember::data {

class Transform {
 public:
  virtual ~Transform() = default;
  // Transforms float32 images [B, C, H, W] (contiguous); image b draws from streams[b]. The
  // batch is handed over: a transform may change it in place and return it.
  virtual Tensor apply(Tensor images, std::span<RandomStream> streams) const = 0;
  // One image [C, H, W]; `image` itself is left unchanged.
  Tensor operator()(const Tensor& image, RandomStream& stream) const;
};

// (x - mean[c]) / std[c] for each channel c, as torchvision; a single value serves every channel.
class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor apply(Tensor images, std::span<RandomStream> streams) const override;

 private:
  std::vector<double> mean_, std_;
};

// Pads every side with `padding` zeros, then crops a window of `size` {height, width} at a
// uniformly random position (torchvision's RandomCrop(size, padding)).
class RandomCrop : public Transform {
 public:
  explicit RandomCrop(Pair size, int64_t padding = 0);
  explicit RandomCrop(int64_t size, int64_t padding = 0) : RandomCrop(Pair{size, size}, padding) {}
  Tensor apply(Tensor images, std::span<RandomStream> streams) const override;

 private:
  Pair size_;
  int64_t padding_;
};

// Mirrors an image left-right with probability p.
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor apply(Tensor images, std::span<RandomStream> streams) const override;

 private:
  double p_;
};

// Applies transforms in order: Compose(RandomCrop(28, 4), RandomHorizontalFlip(), Normalize({0.5}, {0.5})).
class Compose : public Transform {
 public:
  explicit Compose(std::vector<std::shared_ptr<const Transform>> transforms);
  template <class... Ts>
    requires(sizeof...(Ts) > 0 && (std::derived_from<Ts, Transform> && ...))
  explicit Compose(Ts... transforms)
      : Compose(std::vector<std::shared_ptr<const Transform>>{std::make_shared<Ts>(std::move(transforms))...}) {}
  Tensor apply(Tensor images, std::span<RandomStream> streams) const override;

 private:
  std::vector<std::shared_ptr<const Transform>> transforms_;
};

}  // namespace ember::data
