// Writes the fuzz targets' seed corpora: for each target a few small valid files, made by
// ember's and stb's own writers, and a few broken ones derived from them. The output is
// committed under fuzz/corpus/; run `write_seeds fuzz/corpus` after changing this file.
#include <stb/stb_image_write.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/ops.h"
#include "fuzz/training_state.h"
#include "serialize/safetensors.h"

namespace fs = std::filesystem;

namespace {

fs::path out_dir;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(out_dir / target);
  std::ofstream(out_dir / target / name, std::ios::binary) << bytes;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every valid seed also goes in truncated to half its size, and with one byte flipped.
void write_with_broken(const std::string& target, const std::string& name, const std::string& bytes) {
  write(target, name, bytes);
  write(target, name + ".cut", bytes.substr(0, bytes.size() / 2));
  std::string flipped = bytes;
  flipped[flipped.size() * 2 / 3] ^= 0x5a;
  write(target, name + ".flip", flipped);
}

void json_seeds() {
  write_with_broken("json", "header.json",
                    R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})");
  write_with_broken("json", "nested.json", R"([[[1,-2]],{"a":[]},{},"\u00e9\ud83d\ude00\n\"\\"])");
  write("json", "fraction.json", "[1.5]");
  write("json", "duplicate.json", R"({"a":1,"a":2})");
  write("json", "deep.json", std::string(200, '[') + std::string(200, ']'));
}

void safetensors_seeds(const fs::path& scratch) {
  const fs::path file = scratch / "seed.safetensors";
  ember::nn::save_safetensors({{"bias", ember::arange(3.0)}, {"weight", ember::ones({2, 2}, ember::kFloat64)}},
                              file.string(), {{"format", "pt"}});
  write_with_broken("safetensors", "two_tensors.safetensors", read(file));
  ember::nn::save_safetensors({{"empty", ember::empty({0, 4}, ember::kUInt8)}}, file.string());
  write_with_broken("safetensors", "empty_tensor.safetensors", read(file));
  write("safetensors", "huge_header_size.safetensors", std::string(8, '\xff') + "{}");
  // The 16-bit floats, with a NaN, an infinity and a subnormal among their values.
  const ember::Tensor values = ember::tensor({1.5, -0.0, std::nan(""), INFINITY, 1e-6, 3e38});
  ember::nn::save_safetensors({{"bf16", values.to(ember::kBFloat16)}, {"f16", values.to(ember::kFloat16)}},
                              file.string());
  write_with_broken("safetensors", "sixteen_bit.safetensors", read(file));
  // As another writer writes them, without checksums: bf16 [1.0], f16 [1.0, -2.0], little-endian.
  const std::string header =
      R"({"b":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"h":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})";
  std::string length(8, '\0');
  for (size_t i = 0; i < 8; ++i) length[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_with_broken("safetensors", "foreign_sixteen_bit.safetensors",
                    length + header + std::string("\x80\x3f\x00\x3c\x00\xc0", 6));
}

// A checkpoint of fuzz/training_state.h's run after one step, so every part has state: momentum
// buffers, a scheduler step, the scaler's growth tracker.
void training_checkpoint_seeds(const fs::path& scratch) {
  ember::fuzz::TrainingRun training;
  ember::Tensor x = ember::ones({4, 3});
  training.scaler.scale(training.model(x).sum()).backward();
  training.scaler.step(training.optimizer);
  training.scaler.update();
  training.scheduler.step();
  ember::examples::TrainingProgress progress;
  progress.epochs = 1;
  progress.steps = 1;
  progress.images = 4;
  progress.test_loss = 0.5;
  progress.csv_rows = "1,0.5,0.5\n";
  const fs::path file = scratch / "seed.safetensors";
  ember::examples::save_training_checkpoint(file.string(), training.state(), progress, training.run);
  write_with_broken("training_checkpoint", "after_one_step.safetensors", read(file));
}

std::string gzip(const std::string& bytes) {
  std::string out(compressBound(static_cast<uLong>(bytes.size())) + 32, '\0');
  z_stream z{};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // 15 + 16: gzip wrapper
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idx_seeds() {
  // magic 00 00 08 <dims>, big-endian uint32 dims, then the bytes.
  const std::string images = std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x02\0\0\0\x03", 16) + "abcdefghijkl";
  const std::string labels = std::string("\0\0\x08\x01\0\0\0\x02", 8) + "\x01\x07";
  write_with_broken("idx", "images.idx.gz", gzip(images));
  write_with_broken("idx", "labels.idx.gz", gzip(labels));
  write("idx", "images.idx", images);
  write("idx", "float_type.idx", std::string("\0\0\x0d\x01\0\0\0\x01", 8) + "abcd");
}

void append(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}

void image_seeds() {
  // A 5 x 3 RGB gradient, and a 2 x 2 gray one.
  unsigned char rgb[5 * 3 * 3], gray[4] = {0, 80, 160, 240};
  for (int i = 0; i < 5 * 3 * 3; ++i) rgb[i] = static_cast<unsigned char>(i * 6);
  std::string png, png_gray, jpg, bmp;
  stbi_write_png_to_func(append, &png, 5, 3, 3, rgb, 5 * 3);
  stbi_write_png_to_func(append, &png_gray, 2, 2, 1, gray, 2);
  stbi_write_jpg_to_func(append, &jpg, 5, 3, 3, rgb, 90);
  stbi_write_bmp_to_func(append, &bmp, 5, 3, 3, rgb);
  write_with_broken("image", "rgb.png", png);
  write_with_broken("image", "gray.png", png_gray);
  write_with_broken("image", "rgb.jpg", jpg);
  write_with_broken("image", "rgb.bmp", bmp);
  write("image", "refused.ppm", "P6\n1 1\n255\n\x10\x20\x30");
}

void wordpiece_seeds() {
  // A vocabulary, 0xff, a text (fuzz_wordpiece.cpp); and texts alone, for BERT's vocabulary.
  const std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##s\nworld\n,\n\xe6\x97\xa5\n";
  write_with_broken("wordpiece", "vocab_and_text", vocab + "\xff" + "Hello, worlds! [MASK] \xe6\x97\xa5\xe6\x9c\xac");
  write("wordpiece", "crlf_vocab", "[UNK]\r\n[CLS]\r\n[SEP]\r\n[PAD]\r\nab\xff" "ab");
  write("wordpiece", "duplicate_vocab", "[UNK]\n[CLS]\n[SEP]\n[PAD]\nab\nab\n\xff" "ab");
  write_with_broken("wordpiece", "accents.txt",
                    "H\xc3\xa9llo na\xc3\xafve \xc4\xb0stanbul \xce\xa3\xce\x9f\xce\xa3 e\xcc\x81");
  write_with_broken("wordpiece", "scripts.txt",
                    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 "
                    "\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 \xf0\x9f\x98\x80");
  write("wordpiece", "controls.txt", std::string("a\0b", 3) + "\x01\tc\x7f\xc2\x85" "d\xef\xbf\xbd");
  write("wordpiece", "long_word.txt", std::string(150, 'a') + " " + std::string(60, 'b') + "...!!!");
  write("wordpiece", "surrogate.txt", "ok \xed\xa0\x80");
  write("wordpiece", "overlong.txt", "\xc0\xaf\xe0\x80\xaf");
}

}  // namespace

// fuzz_op_table's inputs are decisions, not a file format: per row of the table, one input that
// runs it on its own shapes with varied values (the bytes after the first two from a fixed
// generator) and one that asks for its float64 comparison (fuzz/fuzz_op_table.cpp says how the
// bytes are read).
void op_table_seeds() {
  constexpr int kRows = 140;  // the table has fewer: a byte past them wraps to an earlier row
  uint32_t state = 12345;
  for (int row = 0; row < kRows; ++row) {
    std::string hostile{static_cast<char>(row), static_cast<char>(1)};
    for (int i = 0; i < 64; ++i) {
      state = state * 1664525u + 1013904223u;
      hostile += static_cast<char>(state >> 24);
    }
    write("op_table", "row" + std::to_string(row), hostile);
    write("op_table", "row" + std::to_string(row) + ".compare", std::string{static_cast<char>(row), 0, 1, 7});
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  const fs::path scratch = fs::temp_directory_path() / ("ember_write_seeds_" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  json_seeds();
  safetensors_seeds(scratch);
  idx_seeds();
  image_seeds();
  wordpiece_seeds();
  training_checkpoint_seeds(scratch);
  op_table_seeds();
  fs::remove_all(scratch);
  return 0;
}
