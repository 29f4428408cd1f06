// Strict UTF-8 decoding (RFC 3629) and encoding.
#include "data/utf8.h"

#include <cstdio>

#include "core/check.h"

namespace ember::data {

namespace {

std::string hex_bytes(std::string_view bytes) {
  std::string out;
  char buffer[8];
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(buffer, sizeof buffer, i ? " %02x" : "%02x", static_cast<unsigned char>(bytes[i]));
    out += buffer;
  }
  return out;
}

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

[[noreturn]] void invalid(std::string_view context, std::string_view text, size_t at, size_t length, const char* why) {
  EMBER_FAIL(context, ": invalid UTF-8 at byte offset ", at, " (", hex_bytes(text.substr(at, length)), "): ", why);
}

}  // namespace

std::u32string decode_utf8(std::string_view text, std::string_view context) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      out += lead;
      ++i;
      continue;
    }
    // The lead byte says how many continuation bytes follow and the smallest value that needs
    // this many (a smaller one is an overlong encoding, which would let "/" hide as c0 af).
    size_t extra;
    char32_t value, smallest;
    if (is_continuation(lead)) invalid(context, text, i, 1, "a continuation byte without a lead byte");
    if ((lead & 0xE0) == 0xC0) {
      extra = 1, value = lead & 0x1F, smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2, value = lead & 0x0F, smallest = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3, value = lead & 0x07, smallest = 0x10000;
    } else {
      invalid(context, text, i, 1, "a byte that never occurs in UTF-8");
    }
    for (size_t k = 1; k <= extra; ++k) {
      if (i + k >= text.size() || !is_continuation(static_cast<unsigned char>(text[i + k])))
        invalid(context, text, i, k, "a sequence cut short (its lead byte announces more continuation bytes)");
      value = (value << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    if (value < smallest) invalid(context, text, i, extra + 1, "an overlong encoding");
    if (value >= 0xD800 && value <= 0xDFFF) invalid(context, text, i, extra + 1, "a UTF-16 surrogate");
    if (value > 0x10FFFF) invalid(context, text, i, extra + 1, "a value above U+10FFFF");
    out += value;
    i += extra + 1;
  }
  return out;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace ember::data
