// Image headers and pixels through stb_image, with ember's own format and size checks first.
#include "data/image_decode.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>

#include "core/check.h"

namespace ember::data {

// Note [Untrusted images]
// stb_image does not trust a file's extension: given bytes, it asks each of its decoders in
// turn (PNG, BMP, GIF, PSD, PIC, JPEG, PNM, HDR, TGA) whether the bytes look like theirs, and
// the first that says yes decodes them. So a file called cat.png reaches the PNM or TGA decoder
// if that is what its bytes look like, and those decoders are where stb's bugs have been. ember
// decodes two formats, PNG and BMP, and checks their signature itself before stb sees the
// bytes: PNG's 8-byte signature, BMP's "BM". No other stb decoder accepts bytes that start like
// that (GIF, PSD and PIC need their own magic, JPEG starts FF D8, PNM 'P', HDR "#?", and TGA's
// second byte is 0 or 1), so the checked format's decoder is the only one that runs.
// JPEG is refused with its own message: fuzz_image found within a few hundred inputs that the
// JPEG decoder of Debian's stb_image 2.27 writes past a Huffman table when a file declares more
// than 256 codes (docs/fuzzing.md), and ember cannot patch the library it links.
// A PNG's chunk lengths are checked against the file too (fuzz_image found stb allocating a
// chunk's declared length, up to 4 GB, before reading it).
// The header then gives the size before anything is decoded: a PNG of a few hundred KB of
// compressed zeros can declare 16384 x 16384 pixels and take gigabytes and seconds to inflate,
// so images that would need more than kMaxImageValues values are refused, as are images with no
// pixels (resampling one would read outside it).

namespace {

bool starts_with(std::span<const uint8_t> bytes, std::initializer_list<uint8_t> magic) {
  return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin());
}

// Whether every chunk of a PNG (4-byte big-endian length, 4-byte type, data, 4-byte CRC) lies
// inside the file. stb_image grows its buffer to a chunk's declared length before reading the
// chunk, so one false length in a file of a few bytes would allocate up to 4 GB.
bool png_chunks_fit(std::span<const uint8_t> b) {
  static constexpr uint8_t kEnd[] = {'I', 'E', 'N', 'D'};
  for (uint64_t at = 8; at + 8 <= b.size();) {  // the first chunk starts after the signature
    const uint64_t length =
        (uint64_t{b[at]} << 24) | (uint64_t{b[at + 1]} << 16) | (uint64_t{b[at + 2]} << 8) | b[at + 3];
    if (at + 12 + length > b.size()) return false;
    if (std::equal(std::begin(kEnd), std::end(kEnd), b.begin() + static_cast<std::ptrdiff_t>(at + 4))) return true;
    at += 12 + length;
  }
  return true;  // a file cut between chunks: stb reports it as corrupt
}

std::string first_bytes_hex(std::span<const uint8_t> b) {
  std::string out;
  char buffer[4];
  for (size_t i = 0; i < std::min<size_t>(b.size(), 8); ++i) {
    std::snprintf(buffer, sizeof buffer, i ? " %02x" : "%02x", b[i]);
    out += buffer;
  }
  return out.empty() ? "none, the file is empty" : out;
}

}  // namespace

ImageInfo probe_image(std::span<const uint8_t> bytes, int channels, const std::string& name, int64_t max_values) {
  EMBER_CHECK(channels >= 1 && channels <= 4, "[decode_image] ", name, ": channels must be 1 to 4, got ", channels);
  EMBER_CHECK(!starts_with(bytes, {0xFF, 0xD8, 0xFF}), "[decode_image] ", name,
              ": a JPEG file; ember refuses JPEG because the JPEG decoder of the stb_image it links is "
              "not safe on malformed files (docs/fuzzing.md): convert the images to PNG");
  const bool png = starts_with(bytes, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'});
  EMBER_CHECK(png || starts_with(bytes, {'B', 'M'}), "[decode_image] ", name, ": not a PNG or BMP file (first bytes ",
              first_bytes_hex(bytes), "); ember decodes no other image format");
  EMBER_CHECK(!png || png_chunks_fit(bytes), "[decode_image] ", name,
              ": a PNG chunk declares more bytes than the file holds (cut or corrupt)");
  EMBER_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX), "[decode_image] ", name, ": ", bytes.size(),
              " bytes, more than stb_image reads (", INT_MAX, ")");
  int w = 0, h = 0, c = 0;
  EMBER_CHECK(stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c), "[decode_image] ",
              name, ": not a readable image (", stbi_failure_reason(), ")");
  EMBER_CHECK(w > 0 && h > 0, "[decode_image] ", name, ": the image is ", h, "x", w,
              " (height x width) and has no pixels");
  // Unsigned: a BMP header may declare INT_MAX x INT_MAX pixels (stbi_info does not bound BMP
  // sizes), and times 4 channels that passes INT64_MAX, though not UINT64_MAX.
  const int decoded_channels = std::max(c, channels);
  const uint64_t values = uint64_t(w) * uint64_t(h) * uint64_t(decoded_channels);
  EMBER_CHECK(max_values >= 0 && values <= static_cast<uint64_t>(max_values), "[decode_image] ", name, ": a ", h, "x",
              w, " image with ", decoded_channels, " channels needs ", values, " values, more than the ", max_values,
              " ember decodes");
  return {h, w, c};
}

DecodedImage decode_image(std::span<const uint8_t> bytes, int channels, const std::string& name,
                          int64_t max_values) {
  const ImageInfo info = probe_image(bytes, channels, name, max_values);
  DecodedImage out;
  int w = 0, h = 0, c = 0;
  out.pixels = {stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c, channels),
                stbi_image_free};
  EMBER_CHECK(out.pixels != nullptr, "[decode_image] ", name, ": cannot decode (", stbi_failure_reason(), ")");
  // The decoder reads the header probe_image read; a mismatch would be an stb bug, not bad input.
  EMBER_CHECK(h == info.height && w == info.width, "[decode_image] ", name, ": decoded ", h, "x", w,
              " pixels but the header says ", info.height, "x", info.width);
  out.height = h;
  out.width = w;
  out.channels = channels;
  return out;
}

std::vector<uint8_t> read_image_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EMBER_CHECK(in, "[decode_image] ", path, ": cannot open (", std::strerror(errno), ")");
  const std::streamoff size = in.tellg();
  EMBER_CHECK(size >= 0, "[decode_image] ", path, ": cannot read its size");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EMBER_CHECK(in, "[decode_image] ", path, ": reading ", bytes.size(), " bytes failed");
  return bytes;
}

}  // namespace ember::data
