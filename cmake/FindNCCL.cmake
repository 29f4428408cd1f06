# Finds NCCL (NVIDIA's collectives library: nccl.h, libnccl.so), next to the CUDA toolkit's own
# headers and libraries (where this machine's toolkit ships it) or in the system's folders.
# Call after find_package(CUDAToolkit). Sets NCCL_FOUND and defines the imported target NCCL::NCCL.
# Used by ember's own build and, installed next to emberConfig.cmake, by find_package(ember).
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})

include(${CMAKE_CURRENT_LIST_DIR}/ember_import_library.cmake)
ember_import_library(NCCL NCCL::NCCL
  "NCCL comes with some CUDA toolkits; otherwise install NVIDIA's libnccl-dev, or configure with EMBER_NCCL=OFF")
