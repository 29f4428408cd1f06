# Finds the OpenMP build of OpenBLAS (Debian: libopenblas-openmp-dev), whose threads are the same
# OpenMP team as ember's own loops (docs/internals.md, "One thread pool"); the pthreads build
# would start a second team.
# Sets OpenBLASOpenMP_FOUND and defines the imported target OpenBLAS::OpenMP.
# Used by ember's own build and, installed next to emberConfig.cmake, by find_package(ember).
find_path(OpenBLASOpenMP_INCLUDE_DIR cblas.h
  PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
find_library(OpenBLASOpenMP_LIBRARY openblas
  PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)

include(${CMAKE_CURRENT_LIST_DIR}/ember_import_library.cmake)
ember_import_library(OpenBLASOpenMP OpenBLAS::OpenMP
  "install Debian's libopenblas-openmp-dev (ember's 'make deps' does)")
