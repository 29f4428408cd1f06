#pragma once
// UTF-8 to code points and back, strictly: text that is not well-formed UTF-8 is an error
// naming the byte offset of the bad sequence, never replacement characters.
#include <string>
#include <string_view>

namespace ember::data {

// The code points of `text`. Throws ember::Error "<context>: invalid UTF-8 at byte offset N
// (<bytes>): <why>" for a stray continuation byte, a sequence cut short, an overlong encoding,
// a surrogate (U+D800..U+DFFF), a value above U+10FFFF, or a byte that never occurs in UTF-8.
std::u32string decode_utf8(std::string_view text, std::string_view context);

// Appends the UTF-8 bytes of a valid code point (not a surrogate, at most U+10FFFF).
void append_utf8(char32_t c, std::string& out);

}  // namespace ember::data
