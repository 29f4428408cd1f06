# The common end of ember's find modules (FindOpenBLASOpenMP.cmake, Findstb.cmake, FindDNNL.cmake): once they
# have searched <package>_LIBRARY and <package>_INCLUDE_DIR, report the result as every find
# module does (<package>_FOUND, or why not) and define the imported target <target> for them.
include(FindPackageHandleStandardArgs)

macro(ember_import_library package target install_hint)
  find_package_handle_standard_args(${package}
    REQUIRED_VARS ${package}_LIBRARY ${package}_INCLUDE_DIR
    REASON_FAILURE_MESSAGE "${install_hint}")
  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${${package}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${package}_INCLUDE_DIR}")
  endif()
endmacro()
