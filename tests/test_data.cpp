// data: TensorDataset, the IDX reader and Fashion-MNIST (real files and corrupt ones written
// here), ImageFolder on small PNG/BMP images written here, the transforms, and the DataLoader's
// order, determinism, worker exceptions and epochs.
#include <gtest/gtest.h>
#include <stb/stb_image_write.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/ops.h"
#include "data/dataloader.h"
#include "data/idx.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::data;
namespace fs = std::filesystem;

namespace {

const char* const kFashionDir = "/usr/share/datasets/fashion-mnist";

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an ember::Error containing '" << needles.front() << "'";
  } catch (const Error& e) {
    for (const std::string& needle : needles)
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A fresh directory per test, removed afterwards.
class DataFiles : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_.path(name); }

  std::string write_raw(const std::string& name, const std::string& bytes) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }

  std::string write_gz(const std::string& name, const std::string& bytes) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    gzFile f = gzopen(path(name).c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    gzclose(f);
    return path(name);
  }

  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  ember::testing::TempDir temp_;
};

// An IDX file: magic 00 00 <type> <ndim>, big-endian dims, then `data`.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& data, uint8_t type = 0x08) {
  std::string out{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((d >> shift) & 0xff);
  return out + data;
}

std::string pseudo_random_bytes(size_t n, uint32_t seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    out[i] = static_cast<char>(seed >> 24);
  }
  return out;
}

// A small Fashion-MNIST-like split in `dir`, written by `write(name, bytes)`: n images of 4x5
// with labels i % 10.
template <class Write>
void write_split(Write write, const std::string& dir, const std::string& split, uint32_t n) {
  std::string labels;
  for (uint32_t i = 0; i < n; ++i) labels += static_cast<char>(i % 10);
  write(dir + "/" + split + "-images-idx3-ubyte.gz", idx_bytes({n, 4, 5}, pseudo_random_bytes(n * 20, n)));
  write(dir + "/" + split + "-labels-idx1-ubyte.gz", idx_bytes({n}, labels));
}

bool have_fashion_mnist() { return fs::exists(fs::path(kFashionDir) / "train-labels-idx1-ubyte.gz"); }

const FashionMNIST& fashion_train() {
  static const FashionMNIST dataset(kFashionDir, true);
  return dataset;
}

#define REQUIRE_FASHION_MNIST()                                                                        \
  if (!have_fashion_mnist())                                                                           \
  GTEST_SKIP() << kFashionDir << " is missing: install Debian's dataset-fashion-mnist (make deps)"

std::vector<int64_t> all_targets(DataLoader& loader, std::vector<int64_t>* batch_sizes = nullptr) {
  std::vector<int64_t> seen;
  for (Batch& b : loader) {
    std::vector<int64_t> t = b.target.to_vector<int64_t>();
    seen.insert(seen.end(), t.begin(), t.end());
    if (batch_sizes) batch_sizes->push_back(b.data.size(0));
  }
  return seen;
}

// Examples data = [index, index, ...] as float, target = index.
std::shared_ptr<TensorDataset> counting_dataset(int64_t n, Shape example_shape = {3}) {
  Shape shape{n};
  shape.insert(shape.end(), example_shape.begin(), example_shape.end());
  Tensor targets = arange(static_cast<double>(n), kInt64);
  Tensor data = empty(shape);
  const int64_t row = numel_of(example_shape);
  float* p = data.data<float>();
  for (int64_t i = 0; i < n * row; ++i) p[i] = static_cast<float>(i / row);
  return std::make_shared<TensorDataset>(data, targets);
}

}  // namespace

// --- TensorDataset ---

TEST(TensorDataset, IndexesDimZero) {
  Tensor data = arange(12.0).reshape({4, 3}), targets = tensor({3, 1, 2, 0}, kInt64);
  TensorDataset ds(data, targets);
  EXPECT_EQ(ds.size(), 4);
  Example e = ds.get(2);
  EXPECT_EQ(e.data.to_vector<double>(), (std::vector<double>{6, 7, 8}));
  EXPECT_EQ(e.target.item<int64_t>(), 2);
  std::vector<int64_t> idx{3, 0};
  Batch b = ds.get_batch(idx);
  EXPECT_EQ(b.data.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.data.to_vector<double>(), (std::vector<double>{9, 10, 11, 0, 1, 2}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{0, 3}));
  // The default get_batch (stacking get()) agrees with the override.
  Batch stacked = ds.Dataset::get_batch(idx);
  EXPECT_EQ(stacked.data.to_vector<double>(), b.data.to_vector<double>());
  EXPECT_EQ(stacked.target.to_vector<int64_t>(), b.target.to_vector<int64_t>());
}

TEST(TensorDataset, Errors) {
  expect_error([] { TensorDataset(zeros({4, 3}), zeros({5})); }, {"[TensorDataset]", "[4, 3]", "[5]"});
  TensorDataset ds(zeros({4, 3}), zeros({4}));
  expect_error([&] { ds.get(4); }, {"[TensorDataset] index 4 is out of range for 4 examples"});
  expect_error([&] { ds.get(-1); }, {"index -1"});
}

// --- IDX files and Fashion-MNIST ---

TEST(FashionMNIST, RealFilesSizesLabelsAndPixels) {
  REQUIRE_FASHION_MNIST();
  const FashionMNIST& train = fashion_train();
  FashionMNIST test(kFashionDir, false);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  // First labels, read independently with Python's gzip module.
  std::vector<int64_t> train_first{9, 0, 0, 3, 0, 2, 7, 2, 5, 5, 0, 9};
  std::vector<int64_t> test_first{9, 2, 1, 1, 6, 1, 4, 6, 5, 7, 4, 5};
  for (size_t i = 0; i < train_first.size(); ++i) {
    EXPECT_EQ(train.get(static_cast<int64_t>(i)).target.item<int64_t>(), train_first[i]) << i;
    EXPECT_EQ(test.get(static_cast<int64_t>(i)).target.item<int64_t>(), test_first[i]) << i;
  }
  Example first = train.get(0);
  EXPECT_EQ(first.data.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(first.data.dtype(), kFloat32);
  EXPECT_EQ(first.target.dtype(), kInt64);
  EXPECT_EQ(first.target.dim(), 0);
  // Byte sum of the first training image (independent check: 76247) and its range.
  double sum = 0;
  for (float v : first.data.to_vector<float>()) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
    sum += std::round(v * 255.0);
  }
  EXPECT_EQ(sum, 76247);
  EXPECT_EQ(max(first.data).item<double>(), 1.0);
  EXPECT_EQ(train.images().shape(), (Shape{60000, 28, 28}));
  EXPECT_EQ(train.labels().dtype(), kInt64);
}

TEST(FashionMNIST, BatchMatchesExamples) {
  REQUIRE_FASHION_MNIST();
  const FashionMNIST& train = fashion_train();
  std::vector<int64_t> idx{59999, 0, 12345};
  Batch b = train.get_batch(idx);
  EXPECT_EQ(b.data.shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(b.target.shape(), (Shape{3}));
  for (size_t i = 0; i < idx.size(); ++i) {
    Example e = train.get(idx[i]);
    EXPECT_EQ(b.data.select(0, static_cast<int64_t>(i)).to_vector<float>(), e.data.to_vector<float>());
    EXPECT_EQ(b.target.to_vector<int64_t>()[i], e.target.item<int64_t>());
  }
  // ToTensor's x / 255, bit for bit.
  const uint8_t byte = train.images().data<uint8_t>()[59999 * 784 + 300];
  EXPECT_EQ(b.data.to_vector<float>()[300], static_cast<float>(byte) / 255.0f);
  expect_error([&] { train.get(60000); }, {"[FashionMNIST] index 60000 is out of range"});
}

TEST_F(DataFiles, ReadsPathArgumentAndEmberData) {
  auto write = [this](const std::string& n, const std::string& b) { return write_gz(n, b); };
  write_split(write, "root/fashion-mnist", "train", 30);
  write_split(write, "root/fashion-mnist", "t10k", 7);
  write_split(write, "root/mnist", "train", 11);
  FashionMNIST by_path(path("root/fashion-mnist"), false);
  EXPECT_EQ(by_path.size(), 7);
  EXPECT_EQ(by_path.get(0).data.shape(), (Shape{1, 4, 5}));
  EXPECT_EQ(by_path.get(6).target.item<int64_t>(), 6);

  const char* old = std::getenv("EMBER_DATA");
  const std::string saved = old ? old : "";
  setenv("EMBER_DATA", path("root").c_str(), 1);
  EXPECT_EQ(FashionMNIST().size(), 30);
  EXPECT_EQ(MNIST().size(), 11);
  EXPECT_EQ(MNIST().directory(), path("root") + "/mnist");
  old ? setenv("EMBER_DATA", saved.c_str(), 1) : unsetenv("EMBER_DATA");
  EXPECT_EQ(dataset_directory("", "mnist"), old ? saved + "/mnist" : "/usr/share/datasets/mnist");
}

TEST_F(DataFiles, ReadsPlainIdx) {
  auto write = [this](const std::string& n, const std::string& b) { return write_raw(n, b); };
  write_split(write, "plain", "train", 5);
  Tensor images = read_idx(path("plain/train-images-idx3-ubyte.gz"));
  EXPECT_EQ(images.shape(), (Shape{5, 4, 5}));
  EXPECT_EQ(images.dtype(), kUInt8);
  EXPECT_EQ(FashionMNIST(path("plain")).size(), 5);
}

TEST_F(DataFiles, MissingFilesAndFolders) {
  expect_error([&] { FashionMNIST(path("nowhere")); },
               {"[FashionMNIST] data directory", path("nowhere"), "EMBER_DATA"});
  write_gz("d/train-images-idx3-ubyte.gz", idx_bytes({2, 4, 5}, std::string(40, '\1')));
  expect_error([&] { FashionMNIST(path("d")); }, {path("d/train-labels-idx1-ubyte.gz"), "no such file"});
}

TEST_F(DataFiles, BadHeaders) {
  std::string data(40, '\1');
  std::string bad_magic = idx_bytes({2, 4, 5}, data);
  bad_magic[0] = 0x1f;
  expect_error([&] { read_idx(write_gz("magic.gz", bad_magic)); },
               {path("magic.gz"), "not an IDX file", "1f 00 08 03"});
  expect_error([&] { read_idx(write_gz("type.gz", idx_bytes({2, 4, 5}, data, 0x0d))); },
               {path("type.gz"), "type 0x0d", "only unsigned bytes"});
  expect_error([&] { read_idx(write_gz("short.gz", std::string("\0\0", 2))); },
               {path("short.gz"), "truncated", "header"});
  // A header that declares far more data than the file could decompress to.
  expect_error([&] { read_idx(write_gz("huge.gz", idx_bytes({60000, 60000, 60000}, data))); },
               {path("huge.gz"), "[60000, 60000, 60000]", "more data than the file can hold"});
  // No data at all, but the strides of these dims overflow int64: still not a shape.
  const std::string zero_then_huge =
      write_gz("zero_then_huge.gz", idx_bytes({0, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, ""));
  expect_error([&] { read_idx(zero_then_huge); },
               {zero_then_huge, "[0, 4294967295, 4294967295, 4294967295]", "more data than the file can hold"});
  // Found by fuzz_idx: a zero dim makes the data empty, but the tensor's element count
  // multiplies the others first, and 2^32 - 1 twice overflows int64.
  expect_error([&] { read_idx(write_gz("zero.gz", idx_bytes({0xFFFFFFFF, 0xFFFFFFFF, 0}, ""))); },
               {path("zero.gz"), "[4294967295, 4294967295, 0]", "more data than the file can hold"});
  EXPECT_EQ(read_idx(write_gz("empty.gz", idx_bytes({0, 28, 28}, ""))).shape(), (Shape{0, 28, 28}));
  expect_error([&] { read_idx(write_gz("long.gz", idx_bytes({2, 4, 5}, data + "xx"))); },
               {path("long.gz"), "holds more data than the dims [2, 4, 5]"});
  expect_error([&] { read_idx(write_gz("short_data.gz", idx_bytes({2, 4, 5}, data.substr(0, 39)))); },
               {path("short_data.gz"), "truncated: expected 40 bytes of data, found 39"});
}

TEST_F(DataFiles, DimensionsAndCountsMustAgree) {
  write_gz("a/train-images-idx3-ubyte.gz", idx_bytes({3, 4, 5}, std::string(60, '\1')));
  write_gz("a/train-labels-idx1-ubyte.gz", idx_bytes({2}, std::string(2, '\1')));
  expect_error([&] { FashionMNIST(path("a")); },
               {"[FashionMNIST]", path("a/train-images-idx3-ubyte.gz"), "holds 3 images but",
                path("a/train-labels-idx1-ubyte.gz"), "holds 2 labels"});
  write_gz("b/train-images-idx3-ubyte.gz", idx_bytes({3, 20}, std::string(60, '\1')));
  write_gz("b/train-labels-idx1-ubyte.gz", idx_bytes({3}, std::string(3, '\1')));
  expect_error([&] { FashionMNIST(path("b")); },
               {path("b/train-images-idx3-ubyte.gz"), "expected images [N, H, W]", "[3, 20]"});
  write_gz("c/train-images-idx3-ubyte.gz", idx_bytes({3, 4, 5}, std::string(60, '\1')));
  write_gz("c/train-labels-idx1-ubyte.gz", idx_bytes({3, 1}, std::string(3, '\1')));
  expect_error([&] { FashionMNIST(path("c")); }, {path("c/train-labels-idx1-ubyte.gz"), "expected labels [N]"});
}

TEST_F(DataFiles, LabelsOutOfRange) {
  write_gz("d/train-images-idx3-ubyte.gz", idx_bytes({3, 4, 5}, std::string(60, '\1')));
  write_gz("d/train-labels-idx1-ubyte.gz", idx_bytes({3}, std::string("\x09\x00\x0a", 3)));
  expect_error([&] { FashionMNIST(path("d")); },
               {path("d/train-labels-idx1-ubyte.gz"), "label 10 of example 2 is not below the 10 classes"});
}

TEST_F(DataFiles, TruncatedAndCorruptGzip) {
  const std::string payload = idx_bytes({50, 28, 28}, pseudo_random_bytes(50 * 784, 1));
  const std::string gz = read(write_gz("good.gz", payload));
  ASSERT_GT(gz.size(), 1000u);
  EXPECT_EQ(read_idx(path("good.gz")).shape(), (Shape{50, 28, 28}));

  write_raw("cut.gz", gz.substr(0, gz.size() / 2));
  expect_error([&] { read_idx(path("cut.gz")); },
               {path("cut.gz"), "corrupt or truncated gzip data", "unexpected end of file"});

  write_raw("no_trailer.gz", gz.substr(0, gz.size() - 4));  // the deflate data is whole, the size is not
  expect_error([&] { read_idx(path("no_trailer.gz")); }, {path("no_trailer.gz"), "corrupt or truncated gzip data"});

  std::string flipped = gz;
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) flipped[i] = static_cast<char>(~flipped[i]);
  write_raw("flipped.gz", flipped);
  expect_error([&] { read_idx(path("flipped.gz")); }, {path("flipped.gz"), "corrupt or truncated gzip data"});

  std::string bad_crc = gz;
  bad_crc[gz.size() - 6] = static_cast<char>(~bad_crc[gz.size() - 6]);  // inside the CRC-32 trailer
  write_raw("bad_crc.gz", bad_crc);
  expect_error([&] { read_idx(path("bad_crc.gz")); }, {path("bad_crc.gz"), "corrupt or truncated gzip data"});
}

// --- ImageFolder ---

namespace {

// A w x h image with `channels` channels whose pixel (y, x, c) is (seed + 40 y + 7 x + 3 c) % 256.
std::vector<uint8_t> test_pixels(int w, int h, int channels, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(w * h * channels));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        p[static_cast<size_t>((y * w + x) * channels + c)] =
            static_cast<uint8_t>((seed + 40 * y + 7 * x + 3 * c) % 256);
  return p;
}

void write_png(const std::string& file, int w, int h, int channels, const std::vector<uint8_t>& pixels) {
  fs::create_directories(fs::path(file).parent_path());
  ASSERT_TRUE(stbi_write_png(file.c_str(), w, h, channels, pixels.data(), w * channels)) << file;
}

void write_bmp(const std::string& file, int w, int h, int channels, const std::vector<uint8_t>& pixels) {
  fs::create_directories(fs::path(file).parent_path());
  ASSERT_TRUE(stbi_write_bmp(file.c_str(), w, h, channels, pixels.data())) << file;
}

// A PNG's signature and IHDR chunk for a w x h 8-bit image of `color_type` (0 gray, 2 RGB):
// the header stb_image reads sizes from, with no pixel data behind it.
std::string png_header(uint32_t w, uint32_t h, uint8_t color_type = 2) {
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  std::string chunk = "IHDR" + be32(w) + be32(h) + std::string{8, static_cast<char>(color_type), 0, 0, 0};
  const auto crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(chunk.data()), static_cast<unsigned>(chunk.size())));
  return std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + chunk + be32(crc);
}

// A 24-bit BMP's file and info headers for a w x h image, then `pixels`.
std::string bmp_file(int32_t w, int32_t h, const std::string& pixels) {
  auto le = [](uint32_t v, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i) out += static_cast<char>(v >> (8 * i));
    return out;
  };
  return "BM" + le(54 + static_cast<uint32_t>(pixels.size()), 4) + le(0, 4) + le(54, 4) + le(40, 4) +
         le(static_cast<uint32_t>(w), 4) + le(static_cast<uint32_t>(h), 4) + le(1, 2) + le(24, 2) + le(0, 4) +
         le(static_cast<uint32_t>(pixels.size()), 4) + std::string(16, '\0') + pixels;
}

}  // namespace

TEST_F(DataFiles, ImageFolderClassesOrderAndPixels) {
  write_png(path("imgs/b_cat/2.png"), 5, 4, 3, test_pixels(5, 4, 3, 10));
  write_bmp(path("imgs/b_cat/1.BMP"), 5, 4, 3, test_pixels(5, 4, 3, 20));
  write_png(path("imgs/a_dog/x.png"), 5, 4, 3, test_pixels(5, 4, 3, 30));
  write_raw("imgs/a_dog/notes.txt", "not an image, ignored");
  ImageFolder rgb(path("imgs"));
  EXPECT_EQ(rgb.classes(), (std::vector<std::string>{"a_dog", "b_cat"}));
  ASSERT_EQ(rgb.size(), 3);
  EXPECT_EQ(rgb.file(1), path("imgs/b_cat/1.BMP"));
  EXPECT_EQ(rgb.target(0), 0);
  EXPECT_EQ(rgb.target(2), 1);
  EXPECT_EQ(rgb.image_size(), (Pair{4, 5}));

  Example e = rgb.get(1);  // the BMP, seed 20
  EXPECT_EQ(e.data.shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(e.target.item<int64_t>(), 1);
  std::vector<uint8_t> px = test_pixels(5, 4, 3, 20);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 5; ++x)
        EXPECT_EQ(e.data.at({c, y, x}), static_cast<float>(px[static_cast<size_t>((y * 5 + x) * 3 + c)]) / 255.0f);

  ImageFolder gray(path("imgs"), ImageFolderOptions().channels(1));
  EXPECT_EQ(gray.get(0).data.shape(), (Shape{1, 4, 5}));
  ImageFolder resized(path("imgs"), ImageFolderOptions().channels(1).resize({2, 3}));
  EXPECT_EQ(resized.get(2).data.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(resized.image_size(), (Pair{2, 3}));

  DataLoader loader(std::make_shared<ImageFolder>(path("imgs")), DataLoaderOptions().batch_size(2).num_workers(2));
  std::vector<int64_t> sizes;
  EXPECT_EQ(all_targets(loader, &sizes), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 1}));
}

TEST_F(DataFiles, ImageFolderBilinearResize) {
  // One gray row [0, 255] to width 4: half-pixel centers sample 0, 0.25, 0.75, 1.25 (clamped).
  write_png(path("r/c/a.png"), 2, 1, 1, {0, 255});
  ImageFolder ds(path("r"), ImageFolderOptions().channels(1).resize({1, 4}));
  EXPECT_EQ(ds.get(0).data.to_vector<float>(), (std::vector<float>{0.0f, 0.25f, 0.75f, 1.0f}));
  // Downscaling 4 -> 2 averages neighbours: positions 0.5 and 2.5.
  write_png(path("s/c/a.png"), 4, 1, 1, {0, 100, 200, 250});
  ImageFolder down(path("s"), ImageFolderOptions().channels(1).resize({1, 2}));
  EXPECT_EQ(down.get(0).data.to_vector<float>(), (std::vector<float>{50.0f / 255.0f, 225.0f / 255.0f}));
}

TEST_F(DataFiles, ImageFolderErrors) {
  expect_error([&] { ImageFolder(path("none")); }, {"[ImageFolder]", path("none"), "no such directory"});
  write_raw("a_file.png", "x");
  expect_error([&] { ImageFolder(path("a_file.png")); }, {path("a_file.png"), "not a directory"});
  fs::create_directories(path("empty"));
  expect_error([&] { ImageFolder(path("empty")); }, {path("empty"), "has no class sub-folders"});
  write_raw("no_images/c/readme.txt", "x");
  expect_error([&] { ImageFolder(path("no_images")); },
               {path("no_images/c"), "holds no .png, .jpg, .jpeg or .bmp files"});
  write_raw("garbage/c/bad.png", "this is not a png");
  expect_error([&] { ImageFolder(path("garbage")); }, {path("garbage/c/bad.png"), "not a PNG or BMP file"});
  // A PNG signature, then an end chunk where the header chunk must be.
  write_raw("garbage_png/c/bad.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\0IEND\xae\x42\x60\x82", 20));
  expect_error([&] { ImageFolder(path("garbage_png")); }, {path("garbage_png/c/bad.png"), "not a readable image"});

  write_png(path("mixed/a/1.png"), 4, 4, 3, test_pixels(4, 4, 3, 0));
  write_png(path("mixed/b/1.png"), 6, 4, 3, test_pixels(6, 4, 3, 0));
  expect_error([&] { ImageFolder(path("mixed")); },
               {path("mixed/b/1.png"), "is 4x6", path("mixed/a/1.png"), "is 4x4", "resize"});
  EXPECT_EQ(ImageFolder(path("mixed"), ImageFolderOptions().resize({4, 4})).get(1).data.shape(), (Shape{3, 4, 4}));

  // A PNG whose pixel data is cut after the data set was built fails on get()...
  write_png(path("cut/a/1.png"), 16, 16, 3, test_pixels(16, 16, 3, 5));
  const std::string png = read(path("cut/a/1.png"));
  ImageFolder cut(path("cut"));
  auto cut_loader = std::make_shared<ImageFolder>(path("cut"));
  write_raw("cut/a/1.png", png.substr(0, 50));
  expect_error([&] { cut.get(0); }, {"[decode_image]", path("cut/a/1.png"), "more bytes than the file holds"});
  // ... also through a DataLoader worker, on the training thread.
  DataLoader loader(cut_loader, DataLoaderOptions().num_workers(1));
  expect_error([&] { all_targets(loader); }, {path("cut/a/1.png"), "more bytes than the file holds"});
  // Found by fuzz_image: a chunk that declares 2 GB in a file of a few bytes, refused before
  // stb_image allocates it.
  write_raw("lying/a/1.png", png_header(4, 4) + std::string("\x80\x00\x00\x00IDAT", 8));
  expect_error([&] { ImageFolder(path("lying")).get(0); }, {path("lying/a/1.png"), "more bytes than the file holds"});
  // A PNG whose compressed pixels are corrupt, chunks intact, is found when decoded.
  std::string corrupt = png;
  for (size_t i = 41; i < 49; ++i) corrupt[i] = '\xff';  // inside the IDAT data, after its 8-byte chunk header
  write_raw("corrupt/a/1.png", corrupt);
  expect_error([&] { ImageFolder(path("corrupt")).get(0); }, {path("corrupt/a/1.png"), "cannot decode"});

  expect_error([&] { ImageFolder(path("mixed"), ImageFolderOptions().channels(2)); }, {"channels must be 1 or 3"});
}

// Note [Untrusted images] in data/image_decode.cpp: stb_image picks its decoder from the bytes,
// not the extension, so every format but PNG and BMP is refused before stb sees it.
TEST_F(DataFiles, ImageFolderDecodesOnlyPngAndBmp) {
  const std::string ppm = "P6\n2 2\n255\n" + std::string(12, '\x7f');
  const std::map<std::string, std::string> others = {
      {"ppm", ppm}, {"gif", "GIF89a\x02\x00\x02\x00"}, {"psd", "8BPS\x00\x01"}, {"hdr", "#?RADIANCE\n"},
      {"tga", std::string("\x00\x00\x02\x00\x00\x00\x00\x00", 8)}, {"empty", ""}};
  for (const auto& [name, bytes] : others) {
    SCOPED_TRACE(name);
    const std::string file = write_raw(name + "/c/image.png", bytes);
    expect_error([&] { ImageFolder(path(name)); }, {"[decode_image]", file, "not a PNG or BMP file"});
  }
  // JPEG, whatever the extension: found by fuzz_image, stb_image 2.27's JPEG decoder writes
  // out of bounds on a malformed Huffman table.
  for (const std::string name : {"jpeg/c/a.jpg", "jpeg_as_png/c/a.png"}) {
    fs::create_directories(fs::path(path(name)).parent_path());
    const std::vector<uint8_t> pixels = test_pixels(4, 4, 3, 0);
    ASSERT_TRUE(stbi_write_jpg(path(name).c_str(), 4, 4, 3, pixels.data(), 90));
    expect_error([&] { ImageFolder(fs::path(path(name)).parent_path().parent_path().string()); },
                 {"[decode_image]", path(name), "a JPEG file; ember refuses JPEG", "convert the images to PNG"});
  }
  // A file that was a PNG when the data set was built but is a PPM when read.
  write_png(path("swapped/c/a.png"), 2, 2, 3, test_pixels(2, 2, 3, 0));
  ImageFolder swapped(path("swapped"));
  write_raw("swapped/c/a.png", ppm);
  expect_error([&] { swapped.get(0); }, {"[decode_image]", path("swapped/c/a.png"), "first bytes 50 36 0a 32"});
}

TEST_F(DataFiles, ImageFolderRefusesEmptyImages) {
  // stb_image reads a 0 x 0 BMP; resampling one would read outside it.
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{0, 0}, {0, 3}, {3, 0}}) {
    const std::string name = "empty_" + std::to_string(w) + "x" + std::to_string(h);
    const std::string file = write_raw(name + "/c/a.bmp", bmp_file(w, h, ""));
    expect_error([&] { ImageFolder(path(name), ImageFolderOptions().resize({2, 2})); },
                 {"[decode_image]", file, "has no pixels"});
  }
  // The same check guards get(), for a file emptied after the data set was built.
  write_raw("later/c/a.bmp", bmp_file(1, 1, std::string(4, '\x10')));
  ImageFolder later(path("later"), ImageFolderOptions().resize({2, 2}));
  EXPECT_EQ(later.get(0).data.shape(), (Shape{3, 2, 2}));
  write_raw("later/c/a.bmp", bmp_file(0, 0, ""));
  expect_error([&] { later.get(0); }, {path("later/c/a.bmp"), "has no pixels"});
}

TEST_F(DataFiles, ImageFolderCapsThePixelCount) {
  // 8192 x 8192 RGB is 3 * 2^26 values: refused from the header, before any pixel is inflated.
  const std::string big = write_raw("big/c/a.png", png_header(8192, 8192));
  expect_error([&] { ImageFolder(path("big"), ImageFolderOptions().resize({2, 2})); },
               {"[decode_image]", big, "8192x8192", "201326592 values", "67108864"});
  // Found by fuzz_image: width x height x channels of a BMP header overflowed int64.
  const int32_t int_max = std::numeric_limits<int32_t>::max();
  const std::string bmp_max = write_raw("bmp_max/c/a.bmp", bmp_file(int_max, int_max, ""));
  expect_error([&] { ImageFolder(path("bmp_max")); }, {bmp_max, "13835058042397261827 values", "67108864"});
  // Converting to more channels than the file has counts too: 8192 x 4096 gray is 2^25 values
  // as 1 channel, 3 * 2^25 as 3.
  write_raw("gray/c/a.png", png_header(8192, 4096, 0));
  EXPECT_EQ(ImageFolder(path("gray"), ImageFolderOptions().channels(1)).image_size(), (Pair{4096, 8192}));
  expect_error([&] { ImageFolder(path("gray"), ImageFolderOptions().channels(3)); }, {"100663296 values"});
  // The cap itself is allowed.
  const std::string at_cap = png_header(8192, 8192, 0), past_cap = png_header(8193, 8192, 0);
  auto bytes = [](const std::string& s) { return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  EXPECT_EQ(probe_image(bytes(at_cap), 1, "at_cap.png").width, 8192);
  expect_error([&] { probe_image(bytes(past_cap), 1, "past_cap.png"); }, {"past_cap.png", "67117056 values"});
  // A caller may set a lower cap (the image fuzzer does).
  const std::string small = png_header(16, 16, 0);
  EXPECT_EQ(probe_image(bytes(small), 1, "small.png", 256).width, 16);
  expect_error([&] { probe_image(bytes(small), 1, "small.png", 255); }, {"small.png", "256 values, more than the 255"});
}

// --- transforms ---

TEST(Transforms, Normalize) {
  Tensor img = from_vector(std::vector<float>{0.0f, 0.5f, 1.0f, 0.25f}, {2, 1, 2});
  RandomStream s(0, 0);
  Tensor out = Normalize({0.5, 0.25}, {0.5, 0.25})(img, s);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{-1.0f, 0.0f, 3.0f, 0.0f}));
  EXPECT_EQ(img.to_vector<float>()[0], 0.0f);  // the input is left alone
  EXPECT_EQ(Normalize({0.5}, {0.5})(img, s).to_vector<float>(), (std::vector<float>{-1.0f, 0.0f, 1.0f, -0.5f}));
  expect_error([&] { Normalize({0.1, 0.2, 0.3}, {1, 1, 1})(img, s); },
               {"[Normalize] has 3 means for images of 2 channels"});
  expect_error([] { Normalize({0.1}, {0.0}); }, {"std must be nonzero"});
  expect_error([&] { Normalize({0.1}, {1.0})(zeros({4, 4}), s); }, {"one image [C, H, W]"});
  expect_error([&] { Normalize({0.1}, {1.0})(zeros({1, 4, 4}, kInt64), s); }, {"float32 images", "int64"});
}

TEST(Transforms, RandomCropIsAWindowOfThePaddedImage) {
  const int64_t c = 2, h = 5, w = 6, p = 2;
  Tensor img = add_scalar(rand({c, h, w}), 1.0);  // > 0, so zeros can only come from the padding
  Tensor padded = zeros({c, h + 2 * p, w + 2 * p});
  padded.narrow(1, p, h).narrow(2, p, w).copy_(img);
  std::set<std::pair<int64_t, int64_t>> corners;
  for (uint64_t sample = 0; sample < 40; ++sample) {
    RandomStream s(7, sample);
    Tensor out = RandomCrop(Pair{4, 5}, p)(img, s);
    ASSERT_EQ(out.shape(), (Shape{c, 4, 5}));
    bool found = false;
    for (int64_t top = 0; top + 4 <= h + 2 * p && !found; ++top)
      for (int64_t left = 0; left + 5 <= w + 2 * p && !found; ++left)
        if (padded.narrow(1, top, 4).narrow(2, left, 5).to_vector<float>() == out.to_vector<float>()) {
          found = true;
          corners.insert({top, left});
        }
    EXPECT_TRUE(found) << "sample " << sample;
  }
  EXPECT_GT(corners.size(), 10u);  // the position varies
  RandomStream s(0, 0);
  EXPECT_EQ(RandomCrop(Pair{h, w})(img, s).to_vector<float>(), img.to_vector<float>());  // no padding: identity
  expect_error([&] { RandomCrop(10, 1)(img, s); }, {"[RandomCrop] a 10x10 crop does not fit 5x6 images padded by 1"});
}

TEST(Transforms, RandomHorizontalFlip) {
  Tensor img = arange(12.0).reshape({1, 2, 6}).to(kFloat32);
  RandomStream s(1, 1);
  EXPECT_EQ(RandomHorizontalFlip(1.0)(img, s).to_vector<float>(),
            (std::vector<float>{5, 4, 3, 2, 1, 0, 11, 10, 9, 8, 7, 6}));
  EXPECT_EQ(RandomHorizontalFlip(0.0)(img, s).to_vector<float>(), img.to_vector<float>());
  int flipped = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    RandomStream si(3, i);
    flipped += RandomHorizontalFlip()(img, si).to_vector<float>()[0] == 5.0f;
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
  expect_error([] { RandomHorizontalFlip(1.5); }, {"p must be in [0, 1]"});
}

TEST(Transforms, ComposeChainsAndSharesStreams) {
  Tensor img = rand({1, 8, 8});
  Compose both(RandomCrop(8, 2), RandomHorizontalFlip());
  RandomStream a(5, 9), b(5, 9);
  Tensor composed = both(img, a);
  // The same draws, one transform at a time from one stream.
  Tensor step = RandomHorizontalFlip()(RandomCrop(8, 2)(img, b), b);
  EXPECT_EQ(composed.to_vector<float>(), step.to_vector<float>());
  expect_error([] { Compose(std::vector<std::shared_ptr<const Transform>>{nullptr}); }, {"null transform"});
}

// --- DataLoader ---

TEST(DataLoader, EverySampleOncePerEpoch) {
  auto ds = counting_dataset(103);
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE(workers);
    DataLoader keep(ds, DataLoaderOptions().batch_size(10).shuffle(true).seed(4).num_workers(workers));
    EXPECT_EQ(keep.size(), 11);
    std::vector<int64_t> sizes;
    std::vector<int64_t> seen = all_targets(keep, &sizes);
    EXPECT_EQ(sizes.size(), 11u);
    EXPECT_EQ(sizes.back(), 3);
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expected(103);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(sorted, expected);
    EXPECT_NE(seen, expected);  // shuffled

    DataLoader drop(ds, DataLoaderOptions().batch_size(10).shuffle(true).seed(4).drop_last(true).num_workers(workers));
    EXPECT_EQ(drop.size(), 10);
    sizes.clear();
    std::vector<int64_t> kept = all_targets(drop, &sizes);
    EXPECT_EQ(sizes, std::vector<int64_t>(10, 10));
    EXPECT_EQ(std::set<int64_t>(kept.begin(), kept.end()).size(), 100u);
    EXPECT_TRUE(std::equal(kept.begin(), kept.end(), seen.begin()));  // the same epoch-0 order, less the tail
  }
}

TEST(DataLoader, InOrderWithoutShuffle) {
  DataLoader loader(counting_dataset(25), DataLoaderOptions().batch_size(4).num_workers(3).prefetch(1));
  std::vector<int64_t> expected(25);
  std::iota(expected.begin(), expected.end(), 0);
  for (int epoch = 0; epoch < 3; ++epoch) EXPECT_EQ(all_targets(loader), expected);
  int64_t count = 0;
  for (Batch& b : loader) {
    EXPECT_EQ(b.data.shape()[1], 3);
    EXPECT_EQ(b.data.to_vector<float>()[0], static_cast<float>(count * 4));  // data travels with its target
    ++count;
  }
  EXPECT_EQ(count, 7);
}

TEST(DataLoader, DeterministicOrderAndAugmentation) {
  manual_seed(3);
  auto images = std::make_shared<TensorDataset>(rand({50, 2, 6, 6}), arange(50.0, kInt64));
  auto options = [](uint64_t seed, int workers) {
    return DataLoaderOptions().batch_size(8).shuffle(true).seed(seed).num_workers(workers).transform(
        Compose(RandomCrop(6, 2), RandomHorizontalFlip(), Normalize({0.5}, {0.25})));
  };
  auto epoch_of = [](DataLoader& loader) {
    std::vector<float> pixels;
    std::vector<int64_t> order;
    for (Batch& b : loader) {
      EXPECT_EQ(b.data.shape()[1], 2);
      std::vector<float> p = b.data.to_vector<float>();
      pixels.insert(pixels.end(), p.begin(), p.end());
      std::vector<int64_t> t = b.target.to_vector<int64_t>();
      order.insert(order.end(), t.begin(), t.end());
    }
    return std::make_pair(order, pixels);
  };
  DataLoader a(images, options(11, 0)), b(images, options(11, 3)), c(images, options(12, 2));
  auto a0 = epoch_of(a), b0 = epoch_of(b), c0 = epoch_of(c);
  EXPECT_EQ(a0, b0);  // same seed, any number of workers: same order, same pixels
  EXPECT_NE(a0.first, c0.first);
  EXPECT_NE(a0.second, c0.second);
  auto a1 = epoch_of(a);
  EXPECT_NE(a0.first, a1.first);  // a new permutation and new augmentations each epoch
  EXPECT_NE(a0.second, a1.second);
  EXPECT_EQ(a.epoch(), 2);
  a.set_epoch(0);
  EXPECT_EQ(epoch_of(a), a0);
}

TEST(DataLoader, AugmentationDependsOnTheSampleNotItsBatch) {
  manual_seed(5);
  auto images = std::make_shared<TensorDataset>(rand({20, 1, 5, 5}), arange(20.0, kInt64));
  auto run = [&](int64_t batch_size, bool shuffle) {
    DataLoader loader(images, DataLoaderOptions().batch_size(batch_size).shuffle(shuffle).seed(1).transform(
                                  Compose(RandomCrop(5, 1), RandomHorizontalFlip())));
    std::map<int64_t, std::vector<float>> by_index;
    for (Batch& b : loader)
      for (int64_t i = 0; i < b.data.size(0); ++i)
        by_index[b.target.to_vector<int64_t>()[static_cast<size_t>(i)]] = b.data.select(0, i).to_vector<float>();
    return by_index;
  };
  EXPECT_EQ(run(3, true), run(7, false));
}

namespace {

// Example `bad` throws: an ember::Error, a std::runtime_error or a std::bad_alloc.
enum class Throws { Ember, Runtime, BadAlloc };
struct Failing : Dataset {
  int64_t bad;
  Throws throws;
  mutable std::atomic<int> calls{0};
  Failing(int64_t bad_, Throws throws_) : bad(bad_), throws(throws_) {}
  int64_t size() const override { return 100; }
  Example get(int64_t i) const override {
    ++calls;
    if (i == bad) {
      if (throws == Throws::Runtime) throw std::runtime_error("plain failure");
      if (throws == Throws::BadAlloc) throw std::bad_alloc();
      EMBER_FAIL("[Failing] example ", i, " is broken");
    }
    return {full({2}, static_cast<double>(i)), scalar_tensor(static_cast<double>(i), kInt64)};
  }
};

}  // namespace

TEST(DataLoader, WorkerExceptionsReachTheTrainingThread) {
  for (int workers : {0, 1, 4}) {
    SCOPED_TRACE(workers);
    DataLoader loader(std::make_shared<Failing>(37, Throws::Ember),
                      DataLoaderOptions().batch_size(5).num_workers(workers));
    int64_t batches = 0;
    try {
      for (Batch& b : loader) {
        (void)b;
        ++batches;
      }
      ADD_FAILURE() << "expected an exception";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[Failing] example 37 is broken"), std::string::npos);
    }
    EXPECT_EQ(batches, 7);  // batches 0..6 arrive, batch 7 (examples 35..39) rethrows
    // Other exceptions arrive unchanged, also out of memory in a worker thread (it must not
    // terminate the program there).
    DataLoader other(std::make_shared<Failing>(0, Throws::Runtime), DataLoaderOptions().num_workers(workers));
    EXPECT_THROW(other.begin(), std::runtime_error);
    DataLoader no_memory(std::make_shared<Failing>(12, Throws::BadAlloc),
                         DataLoaderOptions().batch_size(4).num_workers(workers));
    auto it = no_memory.begin();
    for (int k = 0; k < 2; ++k) EXPECT_NO_THROW(++it);
    EXPECT_THROW(++it, std::bad_alloc);  // batch 3, examples 12..15
  }
}

TEST(DataLoader, StoppingEarlyStopsTheWorkers) {
  auto ds = std::make_shared<Failing>(-1, Throws::Ember);
  {
    DataLoader loader(ds, DataLoaderOptions().batch_size(2).num_workers(3).prefetch(2));
    for (Batch& b : loader) {
      (void)b;
      break;
    }
  }
  // At most the first batch and the batches prefetched behind it were made.
  EXPECT_LE(ds->calls.load(), 2 * (1 + 3 * 2));
}

TEST(DataLoader, WorkersRecordNoGraph) {
  Tensor data = rand({12, 3}).requires_grad_();
  auto ds = std::make_shared<TensorDataset>(data, arange(12.0, kInt64));
  for (int workers : {0, 2}) {
    DataLoader loader(ds, DataLoaderOptions().batch_size(4).num_workers(workers));
    for (Batch& b : loader) {
      EXPECT_FALSE(b.data.requires_grad());
      EXPECT_FALSE(b.data.grad_fn());
    }
    EXPECT_TRUE(is_grad_enabled());
  }
}

TEST(DataLoader, EmptyDatasetAndOptionErrors) {
  DataLoader empty_loader(counting_dataset(0), DataLoaderOptions().batch_size(4).num_workers(2));
  EXPECT_EQ(empty_loader.size(), 0);
  EXPECT_TRUE(empty_loader.begin() == empty_loader.end());
  auto ds = counting_dataset(3);
  expect_error([&] { DataLoader(ds, DataLoaderOptions().batch_size(0)); },
               {"[DataLoader] batch_size must be positive"});
  expect_error([&] { DataLoader(ds, DataLoaderOptions().num_workers(-1)); }, {"num_workers"});
  expect_error([&] { DataLoader(ds, DataLoaderOptions().prefetch(0)); }, {"prefetch"});
  expect_error([&] { DataLoader(nullptr); }, {"null data set"});
}

// Batch counts for batch sizes near INT64_MAX, where (n + b - 1) / b would overflow.
TEST(DataLoader, HugeBatchSizePrefetchAndWorkerCounts) {
  auto ds = counting_dataset(10);
  for (int64_t b : {int64_t{11}, std::numeric_limits<int64_t>::max() - 1, std::numeric_limits<int64_t>::max()}) {
    SCOPED_TRACE(b);
    DataLoader loader(ds, DataLoaderOptions().batch_size(b).num_workers(2));
    EXPECT_EQ(loader.size(), 1);
    std::vector<int64_t> sizes;
    EXPECT_EQ(all_targets(loader, &sizes), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_EQ(sizes, (std::vector<int64_t>{10}));
    DataLoader dropping(ds, DataLoaderOptions().batch_size(b).drop_last(true));
    EXPECT_EQ(dropping.size(), 0);
    EXPECT_TRUE(dropping.begin() == dropping.end());
  }
  // The ring holds at most the epoch's batches and there is at most one worker per batch, so
  // a huge prefetch or worker count allocates and starts nothing extra.
  DataLoader deep(ds, DataLoaderOptions().batch_size(3).num_workers(2).prefetch(std::numeric_limits<int>::max()));
  EXPECT_EQ(all_targets(deep).size(), 10u);
  DataLoader crowded(ds, DataLoaderOptions().batch_size(5).num_workers(std::numeric_limits<int>::max()));
  EXPECT_EQ(all_targets(crowded).size(), 10u);
}

TEST(DataLoader, FashionMNISTBatches) {
  REQUIRE_FASHION_MNIST();
  auto train = std::shared_ptr<const Dataset>(&fashion_train(), [](const Dataset*) {});
  DataLoader loader(train, DataLoaderOptions().batch_size(128).shuffle(true).num_workers(2).transform(
                               Compose(RandomCrop(28, 4), RandomHorizontalFlip())));
  EXPECT_EQ(loader.size(), 469);
  int64_t n = 0, batches = 0;
  for (Batch& b : loader) {
    if (batches++ == 0) {
      EXPECT_EQ(b.data.shape(), (Shape{128, 1, 28, 28}));
      EXPECT_EQ(b.target.shape(), (Shape{128}));
      EXPECT_EQ(b.target.dtype(), kInt64);
    }
    n += b.data.size(0);
  }
  EXPECT_EQ(n, 60000);
  EXPECT_EQ(batches, 469);
}

// Note [Distributed sampling]: disjoint shards that cover the data set, the same length on
// every rank, reshuffled per epoch from the shared seed.
TEST(DistributedSampler, ShardsAreDisjointAndCoverTheDataSet) {
  for (int64_t n : {12, 10}) {
    std::vector<int64_t> seen;
    for (int rank = 0; rank < 3; ++rank) {
      data::DistributedSampler sampler(3, rank, {.shuffle = true, .seed = 5});
      std::vector<int64_t> mine = sampler.indices(n, 0);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), 4);
      EXPECT_EQ(sampler.length(n), 4);
      seen.insert(seen.end(), mine.begin(), mine.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> distinct(seen.begin(), std::unique(seen.begin(), seen.end()));
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), n);  // every example, and with 10 two padded twice
    EXPECT_EQ(static_cast<int64_t>(seen.size()), 12);
  }
}

TEST(DistributedSampler, DropLastCutsToEqualShards) {
  std::set<int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    data::DistributedSampler sampler(3, rank, {.shuffle = false, .drop_last = true});
    std::vector<int64_t> mine = sampler.indices(10, 0);
    ASSERT_EQ(mine.size(), 3u);
    EXPECT_EQ(mine[0], rank);  // unshuffled: rank r takes r, r + 3, r + 6
    EXPECT_EQ(mine[2], rank + 6);
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_EQ(seen.count(9), 0u);
}

TEST(DistributedSampler, ReshufflesPerEpochTheSameOnEveryRank) {
  data::DistributedSampler rank0(2, 0, {.seed = 3}), again(2, 0, {.seed = 3}), rank1(2, 1, {.seed = 3});
  EXPECT_EQ(rank0.indices(100, 1), again.indices(100, 1));
  EXPECT_NE(rank0.indices(100, 0), rank0.indices(100, 1));
  std::vector<int64_t> a = rank0.indices(100, 1), b = rank1.indices(100, 1);
  std::set<int64_t> both(a.begin(), a.end());
  both.insert(b.begin(), b.end());
  EXPECT_EQ(both.size(), 100u);
}

TEST(DistributedSampler, DrivesTheDataLoaderAndItsEpochs) {
  auto set = std::make_shared<data::TensorDataset>(arange(10, kFloat32).reshape({10, 1}), arange(10, kInt64));
  auto sampler = std::make_shared<data::DistributedSampler>(2, 1, data::DistributedSamplerOptions{.seed = 9});
  data::DataLoader loader(set, data::DataLoaderOptions().batch_size(2).sampler(sampler));
  EXPECT_EQ(loader.size(), 3);
  for (int64_t epoch : {0, 1}) {
    std::vector<int64_t> got;
    for (data::Batch& batch : loader)
      for (int64_t v : batch.target.to_vector<int64_t>()) got.push_back(v);
    EXPECT_EQ(got, sampler->indices(10, epoch));
  }
  loader.set_epoch(0);
  std::vector<int64_t> first;
  for (data::Batch& batch : loader)
    for (int64_t v : batch.target.to_vector<int64_t>()) first.push_back(v);
  EXPECT_EQ(first, sampler->indices(10, 0));
  expect_error([&] { data::DataLoader(set, data::DataLoaderOptions().shuffle(true).sampler(sampler)); },
               {"[DataLoader] shuffle and a sampler both set the order"});
  expect_error([] { data::DistributedSampler(2, 2); }, {"[DistributedSampler] rank 2 is not in [0, 2)"});
}
