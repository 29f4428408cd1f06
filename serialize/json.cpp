#include "serialize/json.h"

#include <cctype>
#include <cstdio>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "core/check.h"

namespace ember::json {

namespace {

constexpr int kMaxDepth = 64;
constexpr const char* kNoLiterals =
    "true, false and null are not supported (this parser reads objects, arrays, strings and integers)";

// What sits at byte `at` of `text`, for messages.
std::string found_at(std::string_view text, size_t at) {
  if (at >= text.size()) return "end of input";
  const auto c = static_cast<unsigned char>(text[at]);
  if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
  char hex[16];
  std::snprintf(hex, sizeof hex, "byte 0x%02X", c);
  return hex;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Note [Reading through a counter]
// nlohmann's SAX events say what was read but not where. The reader pulls the text through this
// iterator, which counts the bytes it hands over, so a check made at an event can name the
// offset of the last byte read (a key's closing quote, the byte after a number, a '[').
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* at, size_t* read) : at_(at), read_(read) {}
  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    ++*read_;
    return *this;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }

 private:
  const char* at_;
  size_t* read_;
};

// nlohmann's parse errors in ember's words, so a message reads the same whichever check found
// the problem (users and tests match these words). Should a later nlohmann word a complaint
// differently, its own text comes through, still as an ember::Error with the byte offset, and
// the tests of every message say so. A message reads "syntax error while parsing <what> -
// <detail>", where the detail is either the lexer's complaint and "; last read: '...'" or
// "unexpected <token>; expected <token>", optionally followed by "; expected <token>".
// `position` counts the bytes the lexer read (the end of input counting as one), `token` is the
// last token's text. Returns the offset to report and the message.
std::pair<size_t, std::string> translate(std::string_view text, size_t position, const std::string& token,
                                         std::string_view what) {
  const size_t dash = what.find(" - ");
  const std::string_view detail = dash == std::string_view::npos ? what : what.substr(dash + 3);
  const size_t expected_at = detail.rfind("; expected ");
  const std::string_view expected =
      expected_at == std::string_view::npos ? std::string_view() : detail.substr(expected_at + 11);

  if (detail.find("; last read: '") != std::string_view::npos) {  // the lexer's complaint
    const size_t at = std::min(position - 1, text.size());       // the byte it stopped on
    const std::string found = found_at(text, at);
    if (starts_with(detail, "invalid string: missing closing quote")) return {at, "unterminated string"};
    if (starts_with(detail, "invalid string: control character"))
      return {at, "control character " + found + " must be escaped in a string"};
    if (starts_with(detail, "invalid string: forbidden character after backslash"))
      return {at, "invalid escape: " + found + " after a backslash"};
    if (starts_with(detail, "invalid string: '\\u' must be followed by 4 hex digits"))
      return {at, "expected a hex digit in a \\u escape, found " + found};
    if (starts_with(detail, "invalid string: surrogate U+D800..U+DBFF"))
      return {at, "unpaired high surrogate in a \\u escape"};
    if (starts_with(detail, "invalid string: surrogate U+DC00..U+DFFF"))
      return {at, "unpaired low surrogate in a \\u escape"};
    if (starts_with(detail, "invalid string: ill-formed UTF-8")) return {at, "invalid UTF-8 in a string"};
    if (starts_with(detail, "invalid number; expected digit after '-'"))
      return {at, "expected a digit, found " + found};
    if (starts_with(detail, "invalid number")) return {at, "only integers are supported, found a fraction or exponent"};
    if (starts_with(detail, "invalid literal")) {  // a word that is not JSON, or one of true/false/null cut short
      size_t start = at;
      while (start > 0 && std::isalpha(static_cast<unsigned char>(text[start - 1]))) --start;
      if (expected == "end of input") return {start, "unexpected " + found_at(text, start) + " after the JSON value"};
      if (start < text.size() && std::string_view("tfn").find(text[start]) != std::string_view::npos)
        return {start, kNoLiterals};
      return {start, "expected a value, found " + found_at(text, start)};
    }
    return {at, std::string(detail)};
  }

  // A whole token in the wrong place, read up to its last byte. The lexer's token text starts
  // at the token only for strings and numbers; other tokens are found by their length.
  const size_t unexpected_at = detail.find("unexpected ");
  const std::string_view unexpected = unexpected_at == std::string_view::npos
                                          ? std::string_view()
                                          : detail.substr(unexpected_at + 11, expected_at - unexpected_at - 11);
  size_t length = 1;  // ',', ':', '[', ...
  if (unexpected == "end of input") length = 0;
  else if (unexpected == "string literal" || unexpected == "number literal") length = token.size();
  else if (unexpected == "true literal" || unexpected == "null literal") length = 4;
  else if (unexpected == "false literal") length = 5;
  const size_t start = std::min(position - std::min(position, length), text.size());
  const std::string found = found_at(text, start);
  if (starts_with(detail, "unexpected number literal") && start > 0 && text[start - 1] == '0')
    return {start - 1, "numbers may not have leading zeros"};  // "01" reads as 0, then 1
  if (expected == "end of input") return {start, "unexpected " + found + " after the JSON value"};
  if (expected == "'[', '{', or a literal") return {start, "expected a value, found " + found};
  if (expected == "':'") return {start, "expected ':', found " + found};
  if (expected == "string literal") return {start, "expected a string key, found " + found};
  if (expected == "']'") return {start, "expected ',' or ']' in an array, found " + found};
  if (expected == "'}'") return {start, "expected ',' or '}' in an object, found " + found};
  return {start, std::string(detail)};
}

// Builds a Value from nlohmann's SAX events, refusing what Note [JSON subset] rules out. The
// first problem stops the parse (a handler returning false) and is kept for parse() to throw.
class StrictBuilder {
 public:
  using Json = nlohmann::json;

  StrictBuilder(std::string_view text, const size_t* read) : text_(text), read_(read) {}

  Value take_root() { return std::move(root_); }
  bool failed() const { return !error_.empty(); }
  [[noreturn]] void throw_error() const { EMBER_FAIL("invalid JSON at byte ", error_at_, ": ", error_); }

  // nlohmann's SAX interface.
  bool null() { return unsupported(); }
  bool boolean(bool) { return unsupported(); }
  bool number_integer(Json::number_integer_t v) { return integer(v); }
  bool number_unsigned(Json::number_unsigned_t v) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return fail("integer out of the 64-bit range");
    return integer(static_cast<int64_t>(v));
  }
  bool number_float(Json::number_float_t, const Json::string_t& spelling) { return not_an_int64(spelling); }
  bool string(Json::string_t& s) {
    Value v;
    v.kind = Value::Kind::String;
    v.string = std::move(s);
    return add(std::move(v)) != nullptr;
  }
  bool binary(Json::binary_t&) { return unsupported(); }  // only binary formats produce it
  bool start_object(std::size_t) { return open(Value::Kind::Object); }
  bool key(Json::string_t& k) {
    if (!keys_.back().insert(k).second) return fail("duplicate key " + quote(k));
    open_.back()->keys.push_back(std::move(k));
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return open(Value::Kind::Array); }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    if (e.id == 406) return not_an_int64(token);  // a number beyond even a double: 1E400
    std::tie(error_at_, error_) = translate(text_, position, token, e.what());
    return false;
  }

 private:
  bool fail(std::string what) {
    error_at_ = *read_ > 0 ? *read_ - 1 : 0;
    error_ = std::move(what);
    return false;
  }
  bool unsupported() { return fail(kNoLiterals); }
  // nlohmann reads an integer beyond 64 bits as a double; the spelling tells the two apart.
  bool not_an_int64(const std::string& spelling) {
    if (spelling.find_first_of(".eE") == std::string::npos) return fail("integer out of the 64-bit range");
    return fail("only integers are supported, found a fraction or exponent");
  }
  bool integer(int64_t i) {
    Value v;
    v.kind = Value::Kind::Integer;
    v.integer = i;
    return add(std::move(v)) != nullptr;
  }
  bool open(Value::Kind kind) {
    Value v;
    v.kind = kind;
    Value* added = add(std::move(v));
    if (!added) return false;
    open_.push_back(added);
    if (kind == Value::Kind::Object) keys_.emplace_back();
    return true;
  }
  // Places `v` in the innermost open container (its key, for an object, came just before), or
  // makes it the root. A pointer into a parent's items stays valid while `v` is open: the parent
  // gets its next item only after `v` closes.
  Value* add(Value v) {
    if (open_.size() > static_cast<size_t>(kMaxDepth)) {
      fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
      return nullptr;
    }
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    open_.back()->items.push_back(std::move(v));
    return &open_.back()->items.back();
  }

  std::string_view text_;
  const size_t* read_;
  Value root_;
  std::vector<Value*> open_;                // the containers being filled, outermost first
  std::vector<std::set<std::string>> keys_;  // the keys seen in each open object
  size_t error_at_ = 0;
  std::string error_;
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

Value parse(std::string_view text) {
  // nlohmann skips a UTF-8 byte-order mark; JSON inside a file format has none.
  if (starts_with(text, "\xEF")) EMBER_FAIL("invalid JSON at byte 0: expected a value, found ", found_at(text, 0));
  size_t read = 0;
  StrictBuilder builder(text, &read);
  nlohmann::json::sax_parse(CountingIterator(text.data(), &read), CountingIterator(text.data() + text.size(), &read),
                            &builder, nlohmann::json::input_format_t::json, /*strict=*/true,
                            /*ignore_comments=*/false);
  if (builder.failed()) builder.throw_error();
  return builder.take_root();
}

std::string quote(std::string_view s) {
  try {
    return nlohmann::json(std::string(s)).dump();
  } catch (const nlohmann::json::type_error& e) {  // 316: not UTF-8
    // "[json.exception.type_error.316] invalid UTF-8 byte at index 3: 0xFF"
    const std::string_view what = e.what();
    EMBER_FAIL("[json] a string is not valid UTF-8 (", what.substr(what.find("] ") + 2), ")");
  }
}

}  // namespace ember::json
