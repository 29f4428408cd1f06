#pragma once
// EMBER_CHECK: the one way ember reports bad input. It throws ember::Error carrying the
// message and the file:line of the check, so a user sees which op rejected what.
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, const char* file, int line)
      : std::runtime_error(message + " (" + file + ":" + std::to_string(line) + ")"),
        message_(message) {}
  // The message without the source location, for tests that compare text.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

}  // namespace ember

#define EMBER_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) [[unlikely]]                                                  \
      throw ::ember::Error(::ember::detail::concat(__VA_ARGS__), __FILE__, __LINE__); \
  } while (0)

#define EMBER_FAIL(...) throw ::ember::Error(::ember::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

namespace ember {
// An enum value a caller passed, checked against the enumerators 0 .. last (Note [Enums from
// callers] in core/device.h): "[op] unknown <what> 7 (expected 0 to 2)".
template <class E>
void check_enum(E value, E last, const char* op, const char* what) {
  const auto v = static_cast<long long>(value), hi = static_cast<long long>(last);
  EMBER_CHECK(v >= 0 && v <= hi, "[", op, "] unknown ", what, " ", v, " (expected 0 to ", hi, ")");
}
}  // namespace ember
