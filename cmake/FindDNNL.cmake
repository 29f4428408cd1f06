# Finds oneDNN 2.x (Debian: libdnnl-dev), the fast CPU convolution (Note [Convolution through
# oneDNN] in core/cpu/dnnl_conv.cpp). Not through oneDNN's own package file: Debian's build of it
# asks for OpenCL, which ember does not use. 3.x changed the C++ API that file uses, so only 2.x
# counts as found. Debian's libdnnl runs on libgomp, the OpenMP of ember's loops and OpenBLAS.
# Sets DNNL_FOUND and DNNL_VERSION and defines the imported target DNNL::dnnl.
# Used by ember's own build and, installed next to emberConfig.cmake, by find_package(ember).
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY dnnl)
if(DNNL_INCLUDE_DIR AND EXISTS ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h)
  file(STRINGS ${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h _dnnl_version_lines
    REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
    DNNL_VERSION "${_dnnl_version_lines}")
  unset(_dnnl_version_lines)
  if(NOT DNNL_VERSION MATCHES "^2\\.")
    message(STATUS "oneDNN ${DNNL_VERSION} found, but ember's convolution is written for the 2.x API")
    set(DNNL_INCLUDE_DIR DNNL_INCLUDE_DIR-NOTFOUND)
  endif()
endif()

include(${CMAKE_CURRENT_LIST_DIR}/ember_import_library.cmake)
ember_import_library(DNNL DNNL::dnnl "install Debian's libdnnl-dev (ember's 'make deps' does)")
