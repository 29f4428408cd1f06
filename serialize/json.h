#pragma once
// Note [JSON subset]
// The safetensors header is JSON, and reading it is the one place ember parses JSON. The lexing
// (strings with every escape, UTF-8 checks, numbers) is nlohmann's reader from Debian; this
// wrapper makes it strict, because a header comes from a file that may be hostile. It accepts
// exactly what a header needs: objects, arrays, strings and integers within int64. Fractions,
// exponents, true/false/null, duplicate keys, a byte-order mark, comments, trailing content and
// nesting deeper than 64 levels are rejected with an ember::Error naming the byte offset, in the
// same words whichever check found the problem. nlohmann's own tree is not used: a Value keeps
// keys in file order (a header's order carries no meaning, but messages and tests read better
// for it) and holds only the four kinds, so the safetensors reader need not handle the others.
// nlohmann stays inside json.cpp, a private dependency of the library.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::json {

struct Value {
  enum class Kind : uint8_t { Object, Array, String, Integer };
  Kind kind = Kind::Integer;
  int64_t integer = 0;
  std::string string;
  std::vector<Value> items;       // array elements, or object values
  std::vector<std::string> keys;  // object keys, parallel to items (kept in file order)

  // The member called `key` of an object, or nullptr.
  const Value* find(const std::string& key) const;
};

const char* kind_name(Value::Kind kind);  // "object", "array", ...

// Parses one JSON value; only whitespace may surround it.
Value parse(std::string_view text);

// `s` as a JSON string literal, quotes included. Throws if `s` is not valid UTF-8.
std::string quote(std::string_view s);

}  // namespace ember::json
