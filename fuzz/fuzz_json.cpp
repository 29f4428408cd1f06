// libFuzzer target: the safetensors header's JSON reader (serialize/json.h: nlohmann-json under
// ember's strict SAX handler and its translated messages) on arbitrary bytes.
// Bad input must be an ember::Error; anything else escaping, or a sanitizer report, is a finding.
// Every string it accepts must also survive json::quote and a second parse unchanged.
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "serialize/json.h"

namespace {

void check_strings_round_trip(const ember::json::Value& v) {
  auto round_trip = [](const std::string& s) {
    if (ember::json::parse(ember::json::quote(s)).string != s) __builtin_trap();
  };
  if (v.kind == ember::json::Value::Kind::String) round_trip(v.string);
  for (const std::string& key : v.keys) round_trip(key);
  for (const ember::json::Value& item : v.items) check_strings_round_trip(item);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ember::json::Value value;
  try {
    value = ember::json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const ember::Error&) {
    return 0;
  }
  check_strings_round_trip(value);
  return 0;
}
