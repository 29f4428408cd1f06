#pragma once
// ember's release (CHANGELOG.md says what each one changed and what it promises).
#include <string_view>

namespace ember {

// The version of the library this program linked, "MAJOR.MINOR.PATCH": the project(VERSION) of
// ember's CMakeLists.txt, which find_package(ember 0.2) also compares against.
std::string_view version();

}  // namespace ember
