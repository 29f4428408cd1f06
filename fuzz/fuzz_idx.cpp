// libFuzzer target: read_idx (data/idx.h) on arbitrary files, gzipped or plain. Bad input must
// be an ember::Error; anything else escaping, or a sanitizer report, is a finding.
#include <cstdint>

#include "core/check.h"
#include "data/idx.h"
#include "fuzz/input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ember::fuzz::InputFile file("-idx.gz");
  try {
    ember::data::read_idx(file.write(data, size));
  } catch (const ember::Error&) {
  }
  return 0;
}
