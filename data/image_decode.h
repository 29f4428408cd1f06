#pragma once
// Decoding image files that ember did not write: PNG and BMP only (JPEG is refused), size-capped,
// every check made on the header before any pixel is decoded (Note [Untrusted images]).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ember::data {

// An image's sizes, as stb_image reads them from its header.
struct ImageInfo {
  int64_t height, width;
  int64_t channels;  // in the file: 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA)
};

// Decoding allocates width * height * channels bytes (channels: the file's or the requested,
// whichever is more); images needing more than this many are refused before decoding.
inline constexpr int64_t kMaxImageValues = int64_t{1} << 26;  // 64 Mi, e.g. 4096 x 4096 RGBA

// Interleaved uint8 pixels [height, width, channels], row-major.
struct DecodedImage {
  std::unique_ptr<uint8_t, void (*)(void*)> pixels{nullptr, nullptr};
  int64_t height = 0, width = 0, channels = 0;
};

// The header of `bytes`, the contents of the file `name` (used in messages). Throws an
// ember::Error naming the file when it is not PNG or BMP, is unreadable, has no pixels,
// or needs more than `max_values` values when decoded to `channels` (1 to 4).
ImageInfo probe_image(std::span<const uint8_t> bytes, int channels, const std::string& name,
                      int64_t max_values = kMaxImageValues);

// probe_image's checks, then the pixels converted to `channels` (stb_image's conversion).
DecodedImage decode_image(std::span<const uint8_t> bytes, int channels, const std::string& name,
                          int64_t max_values = kMaxImageValues);

// The whole file, for probe_image and decode_image. Throws naming the file if it cannot be read.
std::vector<uint8_t> read_image_file(const std::string& path);

}  // namespace ember::data
