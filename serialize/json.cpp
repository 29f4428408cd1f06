#include "serialize/json.h"

#include <cstdio>
#include <limits>
#include <set>

#include "core/check.h"

namespace ember::json {

namespace {

constexpr int kMaxDepth = 64;

// Length of the valid UTF-8 sequence starting at s[i], or 0 when there is none there (bad lead
// byte, truncated, overlong, a surrogate, or beyond U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t len = 0;
  uint32_t cp = 0;
  if ((lead & 0xE0) == 0xC0) {
    len = 2;
    cp = lead & 0x1Fu;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3;
    cp = lead & 0x0Fu;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4;
    cp = lead & 0x07u;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3Fu);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  auto put = [&](uint32_t bits) { out += static_cast<char>(bits); };
  if (cp < 0x80) {
    put(cp);
  } else if (cp < 0x800) {
    put(0xC0 | (cp >> 6)), put(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    put(0xE0 | (cp >> 12)), put(0x80 | ((cp >> 6) & 0x3F)), put(0x80 | (cp & 0x3F));
  } else {
    put(0xF0 | (cp >> 18)), put(0x80 | ((cp >> 12) & 0x3F)), put(0x80 | ((cp >> 6) & 0x3F)), put(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected " + found() + " after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { EMBER_FAIL("invalid JSON at byte ", pos_, ": ", what); }

  bool at_end() const { return pos_ >= text_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(text_[pos_]); }

  // What sits at the current position, for messages.
  std::string found() const {
    if (at_end()) return "end of input";
    const unsigned char c = peek();
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char hex[16];
    std::snprintf(hex, sizeof hex, "byte 0x%02X", c);
    return hex;
  }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect(char c) {
    skip_whitespace();
    if (at_end() || peek() != static_cast<unsigned char>(c))
      fail(std::string("expected '") + c + "', found " + found());
    ++pos_;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_whitespace();
    if (at_end()) fail("expected a value, found end of input");
    const unsigned char c = peek();
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      Value v;
      v.kind = Value::Kind::String;
      v.string = string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return integer();
    if (c == 't' || c == 'f' || c == 'n')
      fail("true, false and null are not supported (this parser reads objects, arrays, strings and integers)");
    fail("expected a value, found " + found());
  }

  Value object(int depth) {
    Value v;
    v.kind = Value::Kind::Object;
    ++pos_;  // '{'
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return v;
    }
    std::set<std::string> seen;
    while (true) {
      skip_whitespace();
      if (at_end() || peek() != '"') fail("expected a string key, found " + found());
      const size_t key_at = pos_;
      std::string key = string();
      if (!seen.insert(key).second) {
        pos_ = key_at;
        fail("duplicate key " + quote(key));
      }
      expect(':');
      v.items.push_back(value(depth + 1));
      v.keys.push_back(std::move(key));
      skip_whitespace();
      if (!at_end() && peek() == ',') {
        ++pos_;
      } else if (!at_end() && peek() == '}') {
        ++pos_;
        return v;
      } else {
        fail("expected ',' or '}' in an object, found " + found());
      }
    }
  }

  Value array(int depth) {
    Value v;
    v.kind = Value::Kind::Array;
    ++pos_;  // '['
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return v;
    }
    while (true) {
      v.items.push_back(value(depth + 1));
      skip_whitespace();
      if (!at_end() && peek() == ',') {
        ++pos_;
      } else if (!at_end() && peek() == ']') {
        ++pos_;
        return v;
      } else {
        fail("expected ',' or ']' in an array, found " + found());
      }
    }
  }

  // -?(0|[1-9][0-9]*), exactly as JSON spells integers, within int64.
  Value integer() {
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (at_end() || peek() < '0' || peek() > '9') fail("expected a digit, found " + found());
    if (peek() == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9')
      fail("numbers may not have leading zeros");
    const uint64_t limit = negative ? uint64_t{1} << 63 : static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    uint64_t magnitude = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      const uint64_t digit = peek() - '0';
      if (magnitude > (limit - digit) / 10) fail("integer out of the 64-bit range");
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (!at_end() && (peek() == '.' || peek() == 'e' || peek() == 'E'))
      fail("only integers are supported, found a fraction or exponent");
    Value v;
    v.kind = Value::Kind::Integer;
    v.integer = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return v;
  }

  std::string string() {
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      const unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        escape(out);
      } else if (c < 0x20) {
        fail("control character " + found() + " must be escaped in a string");
      } else {
        const size_t n = utf8_sequence_length(text_, pos_);
        if (n == 0) fail("invalid UTF-8 in a string");
        out.append(text_.substr(pos_, n));
        pos_ += n;
      }
    }
  }

  void escape(std::string& out) {
    ++pos_;  // '\'
    if (at_end()) fail("unterminated escape");
    const char c = static_cast<char>(peek());
    if (c != 'u' && std::string_view("\"\\/bfnrt").find(c) == std::string_view::npos)
      fail("invalid escape: " + found() + " after a backslash");
    ++pos_;
    switch (c) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      default: break;  // 'u'
    }
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate in a \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // UTF-16 pair: the low half must follow as \uXXXX
      if (text_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate in a \\u escape");
      pos_ += 2;
      const uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail("unpaired high surrogate in a \\u escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
  }

  uint32_t hex4() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      if (at_end()) fail("truncated \\u escape");
      const unsigned char c = peek();
      uint32_t digit;
      if (c >= '0' && c <= '9') digit = c - '0';
      else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      else fail("expected a hex digit in a \\u escape, found " + found());
      v = v * 16 + digit;
    }
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const Value* Value::find(const std::string& key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &items[i];
  return nullptr;
}

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::Object: return "object";
    case Value::Kind::Array: return "array";
    case Value::Kind::String: return "string";
    case Value::Kind::Integer: return "integer";
  }
  return "?";
}

Value parse(std::string_view text) { return Parser(text).document(); }

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04X", c);
      out += escaped;
    } else {
      const size_t n = utf8_sequence_length(s, i);
      EMBER_CHECK(n != 0, "[json] a string is not valid UTF-8 (byte ", i, " of \"", s.substr(0, i), "...\")");
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out + "\"";
}

}  // namespace ember::json
