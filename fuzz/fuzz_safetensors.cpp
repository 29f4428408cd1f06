// libFuzzer target: load_safetensors (serialize/safetensors.h) on arbitrary files. Bad input must be an
// ember::Error; anything else escaping, or a sanitizer report, is a finding.
#include <cstdint>

#include "core/check.h"
#include "fuzz/input_file.h"
#include "serialize/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ember::fuzz::InputFile file(".safetensors");
  ember::nn::Metadata metadata;
  try {
    ember::nn::load_safetensors(file.write(data, size), &metadata);
  } catch (const ember::Error&) {
  }
  return 0;
}
