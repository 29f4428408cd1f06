#include "core/version.h"

namespace ember {

// EMBER_VERSION comes from CMake (CMakeLists.txt), so the number lives in one place.
std::string_view version() { return EMBER_VERSION; }

}  // namespace ember
