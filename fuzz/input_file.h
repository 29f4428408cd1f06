#pragma once
// For fuzz targets whose code under test reads a path: each input is written to one scratch file
// per process, overwritten by the next input, removed at exit.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace ember::fuzz {

class InputFile {
 public:
  explicit InputFile(const std::string& suffix)
      : path_(std::filesystem::temp_directory_path() / ("ember_fuzz_" + std::to_string(getpid()) + suffix)) {}
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's contents with the input; returns its path.
  const std::string& write(const uint8_t* data, size_t size) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                   static_cast<std::streamsize>(size));
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace ember::fuzz
