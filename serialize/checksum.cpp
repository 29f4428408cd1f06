#include "serialize/checksum.h"

// Inlined from the header, so nothing of libxxhash is linked (an installed ember needs no .so).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ember::nn {

uint64_t checksum(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string checksum_hex(uint64_t value) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = kHex[value & 0xF];
  return out;
}

}  // namespace ember::nn
