// IDX files through zlib, and the MNIST-style data sets built on them.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace ember::data {

namespace {

// A gzipped (or plain) file read through zlib.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    EMBER_CHECK(std::filesystem::is_regular_file(path), "[read_idx] ", path, ": no such file");
    file_ = gzopen(path.c_str(), "rb");
    EMBER_CHECK(file_ != nullptr, "[read_idx] ", path, ": cannot open (", std::strerror(errno), ")");
    gzbuffer(file_, 1 << 18);  // zlib's default 8 KiB buffer makes many small reads
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes: fewer only when the data ends. Throws on corrupt or truncated gzip
  // data (zlib reports a stream that stops early as a short read plus an error state).
  size_t read(void* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      const auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, size_t{1} << 30));
      const int got = gzread(file_, static_cast<char*>(dst) + done, chunk);
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    int code = Z_OK;
    std::string message = gzerror(file_, &code);
    if (message.starts_with(path_ + ": ")) message.erase(0, path_.size() + 2);  // we name the file already
    EMBER_CHECK(done == n || code == Z_OK, "[read_idx] ", path_, ": corrupt or truncated gzip data (zlib: ", message,
                ")");
    return done;
  }

  void read_exact(void* dst, size_t n, const char* what) {
    const size_t got = read(dst, n);
    EMBER_CHECK(got == n, "[read_idx] ", path_, ": truncated: expected ", n, " bytes of ", what, ", found ", got);
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

std::string hex_bytes(const uint8_t* bytes, size_t n) {
  std::string out;
  char buffer[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buffer, sizeof buffer, i ? " %02x" : "%02x", bytes[i]);
    out += buffer;
  }
  return out;
}

// Deflate cannot compress better than about 1032:1, so a header that declares more data than
// that is corrupt; checking it first avoids allocating gigabytes for a garbage header.
constexpr uint64_t kMaxDeflateRatio = 1032;

// x / 255 exactly as torchvision's ToTensor computes it (a division, so values match bit for bit).
void bytes_to_unit(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t k = 0; k < n; ++k) dst[k] = static_cast<float>(src[k]) / 255.0f;
}

}  // namespace

Tensor read_idx(const std::string& path) {
  GzReader in(path);
  uint8_t magic[4];
  in.read_exact(magic, sizeof magic, "header");
  EMBER_CHECK(magic[0] == 0 && magic[1] == 0 && magic[3] >= 1, "[read_idx] ", path,
              ": not an IDX file (magic bytes ", hex_bytes(magic, 4), ", expected 00 00 <type> <dims>)");
  EMBER_CHECK(magic[2] == 0x08, "[read_idx] ", path, ": elements of type 0x", hex_bytes(magic + 2, 1),
              "; only unsigned bytes (0x08) are supported");

  const uint64_t limit = (std::filesystem::file_size(path) + 1) * kMaxDeflateRatio;
  Shape shape;
  // The nonzero dims are held to the limit even when a zero dim makes the data empty: the
  // tensor's element count multiplies every dim, and must not overflow on the way to 0.
  uint64_t nonzero_bytes = 1;
  bool empty_data = false;
  for (int d = 0; d < magic[3]; ++d) {
    uint8_t b[4];
    in.read_exact(b, sizeof b, "header");
    const uint64_t n = (uint64_t{b[0]} << 24) | (uint64_t{b[1]} << 16) | (uint64_t{b[2]} << 8) | b[3];
    shape.push_back(static_cast<int64_t>(n));
    empty_data = empty_data || n == 0;
    if (n != 0) nonzero_bytes = nonzero_bytes > limit / n ? limit + 1 : nonzero_bytes * n;
  }
  EMBER_CHECK(nonzero_bytes <= limit, "[read_idx] ", path, ": the header declares dims ", shape_str(shape),
              ", more data than the file can hold");
  const uint64_t bytes = empty_data ? 0 : nonzero_bytes;

  Tensor out = empty(shape, kUInt8);
  in.read_exact(out.raw_data(), bytes, "data");
  uint8_t extra;
  EMBER_CHECK(in.read(&extra, 1) == 0, "[read_idx] ", path, ": holds more data than the dims ", shape_str(shape),
              " its header declares");
  return out;
}

IdxDataset::IdxDataset(const char* name, std::string dir, bool train, int64_t num_classes)
    : name_(name), dir_(std::move(dir)) {
  EMBER_CHECK(std::filesystem::is_directory(dir_), "[", name_, "] data directory ", dir_,
              " not found (pass the directory, or set EMBER_DATA to the folder above it)");
  const std::string split = train ? "train" : "t10k";
  const std::string images_path = dir_ + "/" + split + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir_ + "/" + split + "-labels-idx1-ubyte.gz";
  images_ = read_idx(images_path);
  Tensor raw_labels = read_idx(labels_path);
  EMBER_CHECK(images_.dim() == 3, "[", name_, "] ", images_path, ": expected images [N, H, W], found dims ",
              shape_str(images_.shape()));
  EMBER_CHECK(raw_labels.dim() == 1, "[", name_, "] ", labels_path, ": expected labels [N], found dims ",
              shape_str(raw_labels.shape()));
  EMBER_CHECK(images_.size(0) == raw_labels.size(0), "[", name_, "] ", images_path, " holds ", images_.size(0),
              " images but ", labels_path, " holds ", raw_labels.size(0), " labels");

  labels_ = empty(raw_labels.shape(), kInt64);
  const uint8_t* src = raw_labels.data<uint8_t>();
  int64_t* dst = labels_.data<int64_t>();
  for (int64_t i = 0; i < raw_labels.numel(); ++i) {
    EMBER_CHECK(src[i] < num_classes, "[", name_, "] ", labels_path, ": label ", int{src[i]}, " of example ", i,
                " is not below the ", num_classes, " classes");
    dst[i] = src[i];
  }
}

Example IdxDataset::get(int64_t index) const {
  Batch one = get_batch(std::span<const int64_t>(&index, 1));
  return {one.data.squeeze(0), one.target.squeeze(0)};
}

Batch IdxDataset::get_batch(std::span<const int64_t> indices) const {
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t h = images_.size(1), w = images_.size(2);
  Batch batch{empty({n, 1, h, w}), empty({n}, kInt64)};
  const uint8_t* images = images_.data<uint8_t>();
  const int64_t* labels = labels_.data<int64_t>();
  float* data = batch.data.data<float>();
  int64_t* target = batch.target.data<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    const int64_t i = indices[static_cast<size_t>(b)];
    check_index(i, name_);
    bytes_to_unit(images + i * h * w, data + b * h * w, h * w);
    target[b] = labels[i];
  }
  return batch;
}

std::string dataset_directory(const std::string& root, const char* subdir) {
  if (!root.empty()) return root;
  const char* env = std::getenv("EMBER_DATA");
  return std::string(env && *env ? env : "/usr/share/datasets") + "/" + subdir;
}

FashionMNIST::FashionMNIST(const std::string& root, bool train)
    : IdxDataset("FashionMNIST", dataset_directory(root, "fashion-mnist"), train, 10) {}

MNIST::MNIST(const std::string& root, bool train)
    : IdxDataset("MNIST", dataset_directory(root, "mnist"), train, 10) {}

}  // namespace ember::data
