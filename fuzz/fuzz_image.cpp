// libFuzzer target: ImageFolder's decode path (data/image_decode.h) on arbitrary bytes, decoded
// to 1 to 4 channels (chosen by the input's size, so the bytes themselves are all image). Bad
// input must be an ember::Error; anything else escaping, or a sanitizer report, is a finding.
#include <cstdint>
#include <span>
#include <vector>

#include "core/check.h"
#include "data/image_decode.h"

// ImageFolder's cap (kMaxImageValues, 64 Mi) would let a 20-byte header make every run decode
// megabytes, so the fuzzer runs with a smaller one: the checks and the decoders are the same
// code, and an input over the cap still goes through every header check.
constexpr int64_t kFuzzMaxValues = int64_t{1} << 16;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int channels = 1 + static_cast<int>(size % 4);
  try {
    const ember::data::DecodedImage image =
        ember::data::decode_image(std::span(data, size), channels, "input", kFuzzMaxValues);
    // Copying the pixels makes ASan check the whole range, so a buffer shorter than the sizes
    // the decoder reported is a finding.
    const uint8_t* pixels = image.pixels.get();
    const std::vector<uint8_t> copy(pixels, pixels + image.height * image.width * image.channels);
  } catch (const ember::Error&) {
  }
  return 0;
}
