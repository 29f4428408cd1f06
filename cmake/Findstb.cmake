# Finds stb_image the way Debian's libstb-dev ships it: compiled into libstb, headers under stb/.
# Sets stb_FOUND and defines the imported target stb::stb.
# Used by ember's own build and, installed next to emberConfig.cmake, by find_package(ember).
find_path(stb_INCLUDE_DIR stb/stb_image.h)
find_library(stb_LIBRARY stb)

include(${CMAKE_CURRENT_LIST_DIR}/ember_import_library.cmake)
ember_import_library(stb stb::stb "install Debian's libstb-dev (ember's 'make deps' does)")
