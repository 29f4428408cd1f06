#pragma once
// Note [JSON subset]
// The safetensors header is JSON, and reading it is the one place ember parses JSON, so ember
// carries its own small strict parser instead of a dependency (nlohmann-json would be one more
// package to install for a few hundred bytes of header). It reads exactly what a header needs —
// objects, arrays, strings (with every JSON escape, UTF-8 checked) and integers — and rejects
// everything else (fractions, exponents, true/false/null, duplicate keys, trailing content) with
// an ember::Error that names the byte offset. Nesting is capped so a hostile file cannot
// exhaust the stack.
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
