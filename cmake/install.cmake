# Install rules: `cmake --install <build> --prefix <dir>` installs ember's headers, its static
# archives and a CMake package, so another project can write
#   find_package(ember CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE ember::ember)
#
# Note [Installed layout]
# ember's own sources include each other as "core/tensor.h", "nn/module.h": relative to the
# source root. Installed, the headers keep that layout one level down, under include/ember/,
# next to the umbrella header:
#   include/ember/ember.h      #include <ember/ember.h>   (include/ on the include path)
#   include/ember/core/...     #include "core/tensor.h"   (include/ember/ on the include path)
# so the installed targets put both directories on their users' include path, as the source
# root alone does in the build tree. core/cpu/ stays out: the CPU kernels' private helpers,
# included by no public header and needing OpenBLAS's cblas.h. lib/cmake/ember/ holds the
# package: emberConfig.cmake (finds the dependencies again, see cmake/emberConfig.cmake.in),
# its version file, the exported targets, and the find modules ember's own build uses.
include(CMakePackageConfigHelpers)

set(EMBER_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
set(EMBER_INSTALL_HEADERDIR ${CMAKE_INSTALL_INCLUDEDIR}/ember)

set(EMBER_HEADER_DIRS core nn serialize optim utils data)
set(EMBER_PRIVATE_HEADER_DIRS core/cpu)  # inside EMBER_HEADER_DIRS, not installed
set(EMBER_INSTALLED_TARGETS ember ember_lib ember_core)
if(EMBER_WITH_CUDA)
  list(APPEND EMBER_HEADER_DIRS cuda)
  list(APPEND EMBER_INSTALLED_TARGETS ember_cuda)
endif()
if(EMBER_WITH_MPI)
  list(APPEND EMBER_HEADER_DIRS distributed)
  list(APPEND EMBER_INSTALLED_TARGETS ember_distributed)
endif()

# Installed as ember::ember (the one to link), ember::ember_lib, ember::ember_core, ember::ember_cuda,
# and ember::distributed (linked as well by programs that use distributed/, when built with MPI).
install(TARGETS ${EMBER_INSTALLED_TARGETS} EXPORT emberTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${EMBER_INSTALL_HEADERDIR})
install(DIRECTORY ${EMBER_HEADER_DIRS} DESTINATION ${EMBER_INSTALL_HEADERDIR}
  FILES_MATCHING PATTERN "*.h"
  REGEX "${EMBER_PRIVATE_HEADER_DIRS}$" EXCLUDE)
install(FILES ember/ember.h DESTINATION ${EMBER_INSTALL_HEADERDIR})

install(EXPORT emberTargets NAMESPACE ember:: DESTINATION ${EMBER_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/emberConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/emberConfig.cmake
  INSTALL_DESTINATION ${EMBER_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/emberConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/emberConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/emberConfigVersion.cmake
  cmake/FindOpenBLASOpenMP.cmake
  cmake/Findstb.cmake
  cmake/FindDNNL.cmake
  cmake/ember_import_library.cmake
  DESTINATION ${EMBER_INSTALL_CMAKEDIR})
